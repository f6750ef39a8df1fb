"""Golden text per building block and target: what each block asks of each stage.

Blocks return structured Parts, so a change to one block shows up here, in that block's file
only, before it shows up in the rendered .def. Refresh with: pytest --update-golden
"""

import pytest
from conftest import GOLDEN, TARGETS, compare_golden

from builder.render import blocks
from builder.render.blocks import parts_by_layer
from builder.render.parts import Part

FIELDS = [name for name in Part.__dataclass_fields__ if name not in ("block", "stage")]


def describe(parts):
    lines = []
    for part in parts:
        lines.append(f"== {part.stage}")
        for field in FIELDS:
            value = getattr(part, field)
            if not value:
                continue
            if field == "kept":
                for name in ("build", "save", "restore"):
                    lines += [f"-- kept {value.name}: {name}", *getattr(value, name)]
                continue
            lines.append(f"-- {field}")
            for item in value:
                lines.append(" ".join(item) if isinstance(item, tuple) else item)
    return "\n".join(lines) + "\n"


def parts_for(target):
    """Every Part once, in %post order (the build-host Parts open both layers)."""
    layers = parts_by_layer(target)
    return layers["base"] + [part for part in layers["top"] if part.block != "build_host"]


def by_block(target):
    grouped = {}
    for part in parts_for(target):
        grouped.setdefault(part.block, []).append(part)
    return grouped


@pytest.mark.parametrize("name", TARGETS)
def test_block_golden(tree, name, update_golden):
    blocks = by_block(tree.target(name))
    folder = GOLDEN / "blocks" / name
    for block, parts in blocks.items():
        compare_golden(folder / f"{block}.txt", describe(parts), update_golden)
    if folder.is_dir():
        assert sorted(p.stem for p in folder.glob("*.txt")) == sorted(blocks), (
            "golden files for blocks that no longer exist; run pytest --update-golden and remove them"
        )


def test_blocks_come_in_build_order(tree):
    order = list(by_block(tree.target("lumi-rocm")))
    assert order == [
        "build_host",
        "os",
        "python",
        "torch",
        "libfabric",
        "rccl_ofi",
        "mpi",
        "provenance",
        "extras",
        "deepspeed",
        "frameworks",
        "runtime",
    ]


def test_each_part_belongs_to_the_layer_its_block_is_listed_in(tree):
    layers = parts_by_layer(tree.target("lumi-rocm"))
    base = {part.block for part in layers["base"]}
    top = {part.block for part in layers["top"]}
    assert {"os", "python", "torch", "rccl_ofi", "mpi"} <= base
    assert top == {"build_host", "provenance", "extras", "deepspeed", "frameworks", "runtime"}


def test_a_top_layer_block_may_not_ask_the_os_block_for_packages(tree, monkeypatch):
    from builder.render.parts import Part

    monkeypatch.setattr(blocks.extras, "parts", lambda target: [Part(block="extras", stage="build", packages=("vim",))])
    with pytest.raises(ValueError, match=r"top-layer blocks may not ask .*\['extras'\]"):
        parts_by_layer(tree.target("cpu"))


def test_os_block_installs_the_union_of_every_blocks_packages_once(tree):
    parts = parts_for(tree.target("lumi-rocm"))
    os_build = next(p for p in parts if p.block == "os" and p.stage == "build")
    wanted = {pkg for p in parts if p.stage == "build" for pkg in p.packages}
    install = next(line for line in os_build.post if line.startswith("apt-get install"))
    assert install.split()[4:] == sorted(wanted)


def test_only_the_final_stage_gets_runtime_pieces(tree):
    for name in TARGETS:
        for part in parts_for(tree.target(name)):
            if part.stage == "build":
                assert not (
                    part.env or part.test or part.runscript or part.labels or part.help or part.copy_from_build
                ), (name, part.block)


BLOCK_MODULES = [blocks.build_host, blocks.os_packages, *blocks.BASE_BLOCKS, *blocks.TOP_BLOCKS]


def test_each_block_file_is_named_for_the_block_it_emits(tree):
    emitted = {}
    for name in TARGETS:
        target = tree.target(name)
        for module in BLOCK_MODULES:
            args = (
                (target, {"build": {"ca-certificates"}, "final": set()}) if module is blocks.os_packages else (target,)
            )
            emitted.setdefault(blocks.block_name(module), set()).update(part.block for part in module.parts(*args))
    assert {file: names for file, names in emitted.items() if names != {file}} == {}


def test_each_block_documents_what_it_emits_and_reads_with_an_example():
    for module in BLOCK_MODULES:
        doc = module.__doc__ or ""
        name = blocks.block_name(module)
        assert f'Emits: "{name}"' in doc, f"{name}: no 'Emits: \"{name}\", <stages>' in its docstring"
        assert "Reads: " in doc, f"{name}: no 'Reads: ' (target and site fields) in its docstring"
        assert "Example" in doc and "\n    " in doc, f"{name}: no indented example in its docstring"


def test_library_folders_follow_the_images_cpu_architecture(tree):
    """No multiarch triplet is written in a block: the distribution's libfabric folder is the
    target's (issue 34)."""
    import dataclasses

    from builder.render.blocks import libfabric

    lumi = tree.target("lumi-rocm")
    distro = dataclasses.replace(lumi, comm=dataclasses.replace(lumi.comm, libfabric=()))
    assert libfabric.lib_dir(distro) == "/usr/lib/x86_64-linux-gnu"
    assert libfabric.lib_dir(dataclasses.replace(distro, arch="aarch64")) == "/usr/lib/aarch64-linux-gnu"
    assert libfabric.lib_dir(lumi) == f"{libfabric.LIBFABRIC_PREFIX}/lib"


def test_only_an_image_of_another_arch_compiles_its_ops_with_cross_compilers(tree):
    """gh200-cuda's op compile takes the x86-64 compilers a build binds at /mnt/cross, when
    there; every image names its arch's baseline CPU to DeepSpeed (under QEMU lscpu reports
    the x86-64 host; on x86-64, the build host's AVX-512) (issue 34)."""
    from builder.render.blocks import deepspeed

    def kept_build(name):
        part = next(p for p in deepspeed.parts(tree.target(name)) if p.stage == "build")
        return "\n".join(part.kept.build)

    arm = kept_build("gh200-cuda")
    assert 'if [ -r /mnt/cross/enter.sh ]; then cross=/mnt/cross; . "$cross/enter.sh"; fi' in arm
    assert """'    return {"arch": "ARM_8", "flags": ""}' > "$ds_tmp/cpu/cpuinfo.py\"""" in arm
    assert arm.index('export PYTHONPATH="$ds_tmp/cpu"') < arm.index("python setup.py") < arm.index("unset PYTHONPATH")
    for name in ("a100-cuda", "cpu", "lumi-rocm"):  # their stand-in names x86-64's baseline
        assert "/mnt/cross" not in kept_build(name)
        assert """'    return {"arch": "X86_64", "flags": "avx2"}' > "$ds_tmp/cpu/cpuinfo.py\"""" in kept_build(name)


@pytest.mark.parametrize(
    "arch, found",
    [("x86_64", "-march=x86-64-v3 -D__AVX256__"), ("aarch64", "-march=native -D__NEON__")],
)
def test_deepspeed_compiles_its_cpu_ops_for_the_arch_baseline_not_the_build_host(
    arch, found, deepspeed_source, tmp_path
):
    """The baseline lines, run by sh in DeepSpeed's own source, make its op_builder hand the
    compile the arch's baseline on this AVX-512 host: AVX2 code for x86-64 images, which run
    on AMD Zen 3 nodes without AVX-512, and NEON for aarch64 (whose cross compilers take
    -march=native as armv8-a). The wheel's copy of op_builder, used by JIT builds on a node,
    is left as it was."""
    import shutil
    import subprocess
    import sys

    from builder.render.blocks import deepspeed

    source = tmp_path / "src"
    shutil.copytree(deepspeed_source / "op_builder", source / "op_builder")
    probe = [
        sys.executable,
        "-c",
        "from op_builder.builder import OpBuilder as B; print(B.cpu_arch(B), B.simd_width(B))",
    ]
    lines = [
        f"ds_tmp={tmp_path}",
        f"cd {source}",
        *deepspeed.cpu_stand_in(arch),
        " ".join(probe[:2]) + f' "{probe[2]}"',
    ]
    result = subprocess.run(["sh", "-ec", "\n".join(lines)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == found, result.stdout
    if arch == "x86_64":  # checked before the compile
        assert "DeepSpeed compiles its CPU ops with -march=x86-64-v3 -D__AVX256__" in result.stdout
    assert "-march=native" in (deepspeed_source / "deepspeed/ops/op_builder/builder.py").read_text()


def test_a_deepspeed_whose_op_builder_moved_on_stops_the_build_before_the_compile(deepspeed_source, tmp_path):
    """If DeepSpeed's op_builder no longer says -march=native where the lines expect it, the
    sed changes nothing, and the check fails the step in one line before any compile."""
    import shutil
    import subprocess

    from builder.render.blocks import deepspeed

    source = tmp_path / "src"
    shutil.copytree(deepspeed_source / "op_builder", source / "op_builder")
    builder = source / "op_builder" / "builder.py"
    builder.write_text(builder.read_text().replace("-march=native", "-mtune=native"))
    lines = [f"ds_tmp={tmp_path}", f"cd {source}", *deepspeed.cpu_stand_in("x86_64")]
    result = subprocess.run(["sh", "-ec", "\n".join(lines)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert (
        "AssertionError: DeepSpeed would compile its CPU ops with ['-mtune=native', '-D__AVX256__']; "
        "expected ['-march=x86-64-v3', '-D__AVX256__']" in result.stderr
    )
