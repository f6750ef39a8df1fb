"""Reading the GPU archs in a shared object's .nv_fatbin, with ELF files written here.

The layout follows what nvcc writes (and cuobjdump reads): an ELF64 section `.nv_fatbin`
holding fat binaries, each a 16-byte header and entries with a kind (1 PTX, 2 machine code)
and an arch number. Checked against cuobjdump on NCCL 2.29.7 and on the DeepSpeed ops of the
CUDA images (tests/test_cuda_images.py, heavy).
"""

import struct
import sys

import pytest
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
    table = b"\0" * 64                                    # section 0 is always empty
    name_at = 1
    for (name, blob), offset in zip(sections, offsets):
        table += struct.pack("<IIQQQQIIQQ", name_at, 1, 0, 0, offset, len(blob), 0, 0, 8, 0)
        name_at += len(name) + 1
    table += struct.pack("<IIQQQQIIQQ", name_at, 3, 0, 0, names_at, len(names), 0, 0, 1, 0)
    return bytes(header) + data + table


def test_machine_code_and_ptx_entries_of_every_fat_binary_are_listed(tmp_path):
    so = tmp_path / "fused_adam_op.so"
    first = fat_binary(entry(2, 70), entry(2, 80))
    second = fat_binary(entry(2, 90), entry(1, 90))       # a second kernel file, with PTX
    so.write_bytes(elf([(b".text", b"\x90" * 40), (b".nv_fatbin", first + b"\0" * 8 + second)]))
    assert fatbin.archs(so) == ("sm_70", "sm_80", "sm_90", "compute_90")


def test_a_cpu_op_has_no_cuda_code(tmp_path):
    so = tmp_path / "cpu_adam_op.so"
    so.write_bytes(elf([(b".text", b"\x90" * 40)]))
    assert fatbin.archs(so) == ()


def test_a_file_that_is_not_elf_is_named(tmp_path):
    text = tmp_path / "notes.so"
    text.write_text("not an object\n" * 10)
    with pytest.raises(fatbin.NotELF, match="notes.so: not a 64-bit little-endian ELF file"):
        fatbin.archs(text)


def test_a_truncated_fat_binary_ends_the_walk_without_an_error(tmp_path):
    whole = fat_binary(entry(2, 80), entry(2, 86))
    so = tmp_path / "cut.so"
    so.write_bytes(elf([(b".nv_fatbin", whole[:len(whole) - 24 - 50])]))   # into the 2nd header
    assert fatbin.archs(so) == ("sm_80",)
