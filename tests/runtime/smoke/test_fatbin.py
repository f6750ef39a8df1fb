"""Reading the GPU archs in a shared object's .nv_fatbin, with ELF files written here.

The layout follows what nvcc writes (and cuobjdump reads): an ELF64 section `.nv_fatbin`
holding fat binaries, each a 16-byte header and entries with a kind (1 PTX, 2 machine code)
and an arch number. Checked against cuobjdump on NCCL 2.29.7 and on the DeepSpeed ops of the
CUDA images (tests/images/test_cuda_images.py, heavy).
"""

import sys

import pytest
from conftest import ROOT
from helpers.elf_files import elf, entry, fat_binary

sys.path.insert(0, str(ROOT / "runtime"))
from smoke import fatbin  # noqa: E402


def test_machine_code_and_ptx_entries_of_every_fat_binary_are_listed(tmp_path):
    so = tmp_path / "fused_adam_op.so"
    first = fat_binary(entry(2, 70), entry(2, 80))
    second = fat_binary(entry(2, 90), entry(1, 90))  # a second kernel file, with PTX
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
    so.write_bytes(elf([(b".nv_fatbin", whole[: len(whole) - 24 - 50])]))  # into the 2nd header
    assert fatbin.archs(so) == ("sm_80",)
