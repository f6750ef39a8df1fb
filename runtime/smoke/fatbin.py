"""Which NVIDIA GPU archs a shared object carries code for, read without CUDA tools or a GPU.

nvcc puts a library's kernels in its ELF section `.nv_fatbin`: one or more fat binaries, each a
16-byte header (magic 0xBA55ED50, version, header size, size of what follows) and entries,
each with its own header naming its kind (1: PTX, 2: machine code, an ELF "cubin") and the
arch it was compiled for. Only headers are read; compressed payloads are skipped over, so a
large library takes little time. `cuobjdump --list-elf` / `--list-ptx` say the same where the
CUDA toolkit is at hand (the CUDA images' build checks that they agree).
"""

import struct

MAGIC = 0xBA55ED50
_FAT_HEADER = struct.Struct("<IHHQ")  # magic, version, header size, size of entries
_ENTRY_HEADER = struct.Struct("<HHIQIIHHI")  # kind, -, header size, payload size, -, -, -, -, arch
_KINDS = {1: "compute", 2: "sm"}  # PTX, machine code


class NotELF(ValueError):
    """The file is not a 64-bit little-endian ELF object."""


def archs(path) -> tuple:
    """Sorted arch names ("sm_80", "compute_80") found in ``path``'s .nv_fatbin; () if the
    object has no CUDA code (a CPU op, for one)."""
    data = section(path, b".nv_fatbin")
    found = set()
    offset = 0
    while data and offset + _FAT_HEADER.size <= len(data):
        magic, _, header_size, size = _FAT_HEADER.unpack_from(data, offset)
        if magic != MAGIC:
            offset += 8  # fat binaries start 8-byte aligned
            continue
        entry, end = offset + header_size, min(offset + header_size + size, len(data))
        while entry + _ENTRY_HEADER.size <= end:
            kind, _, entry_header, payload, _, _, _, _, arch = _ENTRY_HEADER.unpack_from(data, entry)
            if kind in _KINDS and arch:
                found.add(f"{_KINDS[kind]}_{arch}")
            if entry_header == 0:
                break
            entry += entry_header + payload
        offset = max(end, offset + 8)
    return tuple(sorted(found, key=_order))


def section(path, name: bytes) -> bytes:
    """The bytes of the ELF section ``name`` in ``path``, or b"" when it has none."""
    with open(path, "rb") as file:
        ident = file.read(64)
        if len(ident) < 64 or ident[:4] != b"\x7fELF" or ident[4] != 2 or ident[5] != 1:
            raise NotELF(f"{path}: not a 64-bit little-endian ELF file")
        (table_offset,) = struct.unpack_from("<Q", ident, 0x28)
        entry_size, count, names_index = struct.unpack_from("<HHH", ident, 0x3A)
        file.seek(table_offset)
        table = file.read(entry_size * count)
        # name, type, flags, address, offset, size (the rest is not needed)
        headers = [struct.unpack_from("<IIQQQQ", table, i * entry_size) for i in range(count)]
        if not headers or names_index >= count:
            return b""
        file.seek(headers[names_index][4])
        names = file.read(headers[names_index][5])
        for name_at, _, _, _, offset, size in headers:
            if names[name_at : names.find(b"\0", name_at)] == name:
                file.seek(offset)
                return file.read(size)
    return b""


def _order(arch):
    kind, number = arch.split("_", 1)
    return (int("".join(ch for ch in number if ch.isdigit()) or 0), kind != "sm", arch)
