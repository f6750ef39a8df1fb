"""The x86-64 compilers an aarch64 build takes on an x86-64 host (builder/host/cross_tools.py),
made for real (debootstrap, apt and pip: about a minute once, then from the user's cache) and
used the way gh200-cuda's DeepSpeed step uses them: bound at /mnt/cross in the aarch64 test
image (`arm_image`), enter.sh sourced. A C++ program they compile and link there runs in the
image and prints what the image's own (emulated) g++ makes it print, and the compiler that
ran is an x86-64 program. nvcc's part is proven by the heavy gh200-cuda build."""

import os
import subprocess

import pytest
from conftest import RECIPES

from builder.host import cross_tools
from builder.host.progress import Progress
from builder.recipes.tree import RecipeTree

# make test-full: the aarch64 test image and the cross compilers are made from nothing on a new
# machine (about 15 min on 2 cores), which alone kept make test over its hour there
pytestmark = [
    pytest.mark.skipif(os.uname().machine != "x86_64", reason="x86-64 compilers for aarch64 images"),
    pytest.mark.full,
]

PROGRAM = r"""
#include <iostream>
#include <map>
#include <string>
int main() {
    std::map<std::string, int> seen{{"ops", 1}};
    std::cout << "aarch64 " << seen.size() << " " << sizeof(long double) << " " << __cplusplus << std::endl;
}
"""
ELF_MACHINE = {62: "x86_64", 183: "aarch64"}  # e_machine, bytes 18-19 of an ELF header


def machine(path) -> str:
    with open(path, "rb") as elf:
        header = elf.read(20)
    assert header[:4] == b"\x7fELF", path
    return ELF_MACHINE.get(int.from_bytes(header[18:20], "little"), "other")


@pytest.fixture(scope="module")
def cross_root():
    root = cross_tools.ensure(RecipeTree(RECIPES).target("gh200-cuda"), Progress())
    assert root is not None and (root / cross_tools.READY).is_file()
    return root


def compile_and_run(apptainer, image, root, work, how):
    (work / "prog.cpp").write_text(PROGRAM)
    script = {
        # as the DeepSpeed step does; "native" becomes the image's baseline CPU
        # and the image's own gcc still links after it (as the libcuda stub of the step does)
        "cross": 'cross=/mnt/cross; . "$cross/enter.sh"; "$CXX" -O2 -march=native -o /src/prog-cross /src/prog.cpp; '
        "echo 'int main(void) { return 0; }' | gcc -x c -o /src/own-after - && /src/own-after",
        "own": "g++ -O2 -o /src/prog-own /src/prog.cpp",
    }[how]
    argv = [apptainer, "exec", "--writable-tmpfs", "--bind", f"{work}:/src", "--bind", f"{root}:/mnt/cross:ro"]
    argv += [image, "sh", "-c", f"set -e; {script}; /src/prog-{how}"]
    result = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return result.stdout


def test_the_x86_64_compilers_write_the_program_the_images_own_g_plus_plus_writes(
    apptainer, arm_image, cross_root, tmp_path
):
    cross = compile_and_run(apptainer, arm_image, cross_root, tmp_path, "cross")
    own = compile_and_run(apptainer, arm_image, cross_root, tmp_path, "own")
    assert cross.splitlines()[-1] == own.splitlines()[-1] == "aarch64 1 16 201703", (cross, own)
    assert "compiling with x86-64 compilers for aarch64: aarch64-linux-gnu-g++" in cross
    assert machine(tmp_path / "prog-cross") == machine(tmp_path / "prog-own") == "aarch64"
    # what compiled it runs natively here
    assert machine(cross_root / "usr/libexec/gcc-cross/aarch64-linux-gnu/14/cc1plus") == "x86_64"
    assert machine(cross_root / "usr/bin/aarch64-linux-gnu-g++-14") == "x86_64"
