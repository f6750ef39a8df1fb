"""Small ELF files written by hand: a `.nv_fatbin` section with the GPU archs nvcc would put
there (read by the smoke suite's fatbin reader and the preflight)."""

import struct
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "runtime"))
from smoke import fatbin  # noqa: E402


def entry(kind, arch, payload=b"\0" * 24):
    header = struct.pack("<HHIQIIHHI", kind, 0x0101, 64, len(payload), 0, 0, 0, 0, arch)
    return header + b"\0" * (64 - len(header)) + payload


def fat_binary(*entries):
    body = b"".join(entries)
    return struct.pack("<IHHQ", fatbin.MAGIC, 1, 16, len(body)) + body


def elf(sections):
    """A minimal ELF64 little-endian object: the named sections, then their name table."""
    names = b"\0" + b"".join(name + b"\0" for name, _ in sections) + b".shstrtab\0"
    data, offsets = b"", []
    for _, blob in sections:
        offsets.append(64 + len(data))
        data += blob + b"\0" * (-len(blob) % 8)
    names_at = 64 + len(data)
    data += names + b"\0" * (-len(names) % 8)
    table_at = 64 + len(data)
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", header, 0x28, table_at)
    struct.pack_into("<HHH", header, 0x3A, 64, len(sections) + 2, len(sections) + 1)
    table = b"\0" * 64  # section 0 is always empty
    name_at = 1
    for (name, blob), offset in zip(sections, offsets):
        table += struct.pack("<IIQQQQIIQQ", name_at, 1, 0, 0, offset, len(blob), 0, 0, 8, 0)
        name_at += len(name) + 1
    table += struct.pack("<IIQQQQIIQQ", name_at, 3, 0, 0, names_at, len(names), 0, 0, 1, 0)
    return bytes(header) + data + table
