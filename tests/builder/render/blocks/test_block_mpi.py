"""The mpi block alone, on targets of the test's own (tests/helpers/mini_target.py)."""

import re

from helpers.mini_target import mini_target

from builder.render.blocks import mpi


def test_open_mpi_comes_from_the_distribution_in_both_stages(tree):
    parts = mpi.parts(mini_target(tree))
    assert [(p.stage, p.packages) for p in parts] == [("build", ("openmpi-bin",)), ("final", ("openmpi-bin",))]
    assert not any("mpi4py" in line for part in parts for line in part.post)


def test_mpi4py_is_its_pinned_binary_wheel_and_never_compiled(tree):
    build = next(p for p in mpi.parts(mini_target(tree, {"mpi": {"mpi4py": True}})) if p.stage == "build")
    (install,) = [line for line in build.post if "mpi4py" in line]
    assert re.fullmatch(r"pip install --no-cache-dir --only-binary=mpi4py mpi4py==\d+\.\d+\.\d+", install)
    assert tree.versions.data["python_packages"]["mpi4py"] in install
