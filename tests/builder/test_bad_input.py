"""The rule for bad input, checked against a corpus of user mistakes.

Every mistake in a recipe or on the command line must:
  * exit with status 2 (1 is kept for failed checks and outside tools),
  * print exactly one line on stderr, starting with ``error: ``,
  * name the file and line as ``<--recipes dir>/<relative file>:<line>: `` when a file is
    involved (the path exactly as given to --recipes, joined with the file's relative path),
  * never show a Python traceback,
  * write nothing: the --out directory and the whole tmp tree are byte-identical afterwards.

Each case copies the real recipe tree into tmp_path, breaks one file and runs the CLI's
main() in this interpreter (helpers.cli_here); a sample of recipe and command-line mistakes
also runs in a fresh interpreter, as a user runs it, and must say the same. Expected line
numbers are found by searching the broken text for the offending line, so the corpus keeps
working when the recipes gain lines.
"""

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from builder.render import runtime_wheel

REPO = Path(__file__).resolve().parents[2]
RECIPES = REPO / "recipes"
from conftest import CONTAINERS, TARGETS, run_builder  # noqa: E402
from helpers import representative  # noqa: E402
from helpers.cli_here import run_here  # noqa: E402

OLD_DEF = b"old\n"  # the one file --out holds before each run; it must survive untouched


# --- running the CLI and watching the disk ------------------------------------------------


def run_cli(*args):
    """``python -m builder ARGS`` from the repository root, in this interpreter (what a fresh
    one would add is checked once, in test_a_fresh_interpreter_says_the_same)."""
    return run_here(*args, cwd=REPO)


def render_all(recipes, out):
    # the site settings beside --out, not the repository's wrappers/sites
    return run_cli("render", "--all", "--recipes", recipes, "--out", out, "--sites-out", sites_out(out))


def sites_out(out: Path) -> Path:
    return Path(out).parent / "sites-out"


def snapshot(root: Path) -> dict:
    """Every directory and file under ``root`` with its bytes: a stray temp file, a new
    .def or a changed byte anywhere makes two snapshots differ."""
    return {
        str(path.relative_to(root)): (None if path.is_dir() else path.read_bytes()) for path in sorted(root.rglob("*"))
    }


@pytest.fixture
def work(tmp_path):
    """A private copy of the recipes and an --out directory holding one old file."""
    recipes = tmp_path / "recipes"
    shutil.copytree(RECIPES, recipes)
    out = tmp_path / "out"
    out.mkdir()
    (out / "cpu.def").write_bytes(OLD_DEF)
    return tmp_path, recipes, out


def assert_bad_input(result, before, tmp_path, out, prefix):
    """The whole rule, for one run that was given bad input; returns the error line."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{result.stderr}"
    line = lines[0]
    assert line.startswith(prefix), f"expected the line to start with {prefix!r}, got {line!r}"
    assert result.returncode == 2, f"exit status {result.returncode}; stderr: {line}"
    # Nothing written: not the .def files, not a temp file, not a byte of the recipes.
    assert result.stdout == "", result.stdout
    assert snapshot(tmp_path) == before
    assert [p.name for p in out.iterdir()] == ["cpu.def"]
    assert (out / "cpu.def").read_bytes() == OLD_DEF
    return line


# --- how a case breaks a file, and where it expects to be told ------------------------------

Edit = Callable[[bytes | None], bytes | None]  # old bytes (None: no such file) -> new


def replace(old: str, new: str | bytes) -> Edit:
    """Replace the one occurrence of ``old`` (two would make the case ambiguous)."""

    def edit(data):
        assert data.count(old.encode()) == 1, f"{old!r} must occur exactly once"
        return data.replace(old.encode(), new if isinstance(new, bytes) else new.encode())

    return edit


def drop_block(header: str) -> Edit:
    """Remove the line ``header`` and the indented lines under it."""

    def edit(data):
        lines = data.decode().splitlines(keepends=True)
        start = lines.index(header + "\n")
        end = start + 1
        while end < len(lines) and lines[end].startswith((" ", "\t")):
            end += 1
        return "".join(lines[:start] + lines[end:]).encode()

    return edit


def prepend(text: str) -> Edit:
    return lambda data: text.encode() + data


def content(data: bytes) -> Edit:
    """Throw the file away and write ``data`` instead."""
    return lambda _old: data


def copy_of(relative: str) -> Edit:
    """A new file holding a copy of a real recipe (for the file-name mistakes)."""
    return lambda _old: (RECIPES / relative).read_bytes()


Line = int | None | Callable[[bytes], int]


def line_with(needle: str | bytes) -> Callable[[bytes], int]:
    """The 1-based line of the broken file that holds ``needle``, which must be unique."""
    needle = needle.encode() if isinstance(needle, str) else needle

    def find(data):
        found = [n for n, line in enumerate(data.split(b"\n"), 1) if needle in line]
        assert len(found) == 1, f"{needle!r} found on lines {found}; make it unique"
        return found[0]

    return find


@dataclass(frozen=True)
class Case:
    id: str
    file: str  # relative to the recipes directory
    edit: Edit
    line: Line  # int, line_with(...), or None where no line makes sense
    expect: str  # a substring of the error message

    def apply(self, recipes: Path) -> int | None:
        path = recipes / self.file
        new = self.edit(path.read_bytes() if path.exists() else None)
        path.write_bytes(new)
        return self.line(new) if callable(self.line) else self.line


CASES = [
    # Roihu's NVMe pool: a request without its size would be refused by Slurm at submission
    Case(
        "pool-request-without-size",
        "sites/roihu.yaml",
        replace("storagesize={size} path={path}'", "storagesize=100G path={path}'"),
        line_with("storagesize=100G path={path}"),
        "scratch.pool.bb:",
    ),
    # Unknown keys: typos must not be silently ignored.
    Case(
        "typo-top-level-key",
        "targets/cpu.yaml",
        replace("sites: [local]", "sitess: [local]"),
        line_with("sitess:"),
        "unknown key 'sitess'",
    ),
    Case(
        "typo-nested-key-skip",
        "targets/cpu.yaml",
        replace("  skip:\n", "  skipp:\n"),
        line_with("skipp:"),
        "deepspeed.skipp: unknown key 'skipp'",
    ),
    # the op list of older recipes: every op is now prebuilt unless skipped with a reason
    Case(
        "deepspeed-ops-list",
        "targets/cpu.yaml",
        replace("  skip:\n", "  ops:\n    cpu_adam: true\n  skip:\n"),
        line_with("ops:"),
        "unknown key 'ops'",
    ),
    Case(
        "typo-nested-key-flavor",
        "targets/cpu.yaml",
        replace("torch:\n  flavour: cpu\n", "torch: {flavor: cpu}\n"),
        line_with("flavor"),
        "unknown key 'flavor'",
    ),
    Case(
        "qos-tier-without-a-name",
        "sites/jean-zay.yaml",
        replace('- {name: qos_gpu_a100-t4, max_time: "4-04:00:00"', '- {nam: qos_gpu_a100-t4, max_time: "4-04:00:00"'),
        line_with("nam: qos_gpu_a100-t4"),
        "slurm.qos.1: missing required key 'name'",
    ),
    Case(
        "typo-site-key",
        "sites/lumi.yaml",
        replace("multi_node:", "multinode:"),
        line_with("multinode:"),
        "unknown key 'multinode'",
    ),
    # Wrong types.
    Case(
        "per-node-as-text",
        "sites/puhti.yaml",
        replace("  per_node: 4\n", "  per_node: eight\n"),
        line_with("per_node: eight"),
        "expected a whole number, found the text 'eight'",
    ),
    Case(
        "sites-as-text",
        "targets/cpu.yaml",
        replace("sites: [local]", "sites: local"),
        line_with("sites: local"),
        "expected a list, found the text 'local'",
    ),
    # YAML reads 2.13 as a float: the pin must be quoted or it would lose digits.
    Case(
        "pin-as-number",
        "versions.yaml",
        replace("torch: 2.13.0", "torch: 2.13"),
        line_with("torch: 2.13"),
        "expected an exact version such as 2.13.0, found the number 2.13",
    ),
    # Missing required keys. A target without `extends` must be complete on its own; the
    # error belongs to that file even when other targets extend it.
    Case("site-missing-mpi", "sites/local.yaml", drop_block("mpi:"), 1, "missing required key 'mpi'"),
    Case("target-missing-comm", "targets/cpu.yaml", drop_block("comm:"), 1, "missing required key 'comm'"),
    Case("extended-target-missing-mpi", "targets/v100-cuda.yaml", drop_block("mpi:"), 1, "missing required key 'mpi'"),
    Case(
        "target-missing-stages",
        "targets/cpu.yaml",
        drop_block("stages:"),
        1,
        "missing required key 'stages' (or site_image: true)",
    ),
    # The site-image route: the base is the site's image, so the recipe names none of its own
    Case(
        "site-image-with-stages",
        "targets/lumi-laif.yaml",
        replace(
            "site_image: true\n",
            "site_image: true\nstages:\n  build: {bootstrap: docker, image: rocm7-devel}\n"
            "  final: {bootstrap: docker, image: rocm7-runtime}\n",
        ),
        line_with("stages:"),
        "stages: a site-image target starts from the site's image; expected no stages",
    ),
    Case(
        "site-image-with-a-torch-pin",
        "targets/lumi-laif.yaml",
        replace("  flavour: rocm\n", "  flavour: rocm\n  version: 2.10.0\n"),
        line_with("version: 2.10.0"),
        "torch.version: a site-image target uses the site image's torch; expected no version",
    ),
    Case(
        "site-image-with-an-mpi-source",
        "targets/lumi-laif.yaml",
        replace("  abi: mpich\n", "  abi: mpich\n  source: mpich\n"),
        line_with("source: mpich"),
        "mpi.source: a site-image target uses the site image's MPI; expected no source",
    ),
    Case(
        "mpich-from-source-without-the-images-libfabric",
        "targets/cpu.yaml",
        replace("  mpi4py: true\n", "  mpi4py: true\n  source: mpich\n"),
        line_with("source: mpich"),
        "mpi.source: an MPI from source is MPICH on the image's own libfabric; "
        "expected abi: mpich and comm.libfabric: cxi",
    ),
    Case(
        "mpi-source-not-in-versions",
        "targets/lumi-rocm.yaml",
        replace("  source: mpich ", "  source: mpich-9 "),
        line_with("source: mpich-9"),
        "mpi.source: unknown source 'mpich-9'; expected one of the sources in ",
    ),
    # issue 34: an image runs natively on its sites' nodes only
    Case(
        "aarch64-image-for-an-x86-64-site",
        "targets/gh200-cuda.yaml",
        replace("sites: [roihu]", "sites: [jean-zay-h100]"),
        line_with("arch: aarch64"),
        "arch: site 'jean-zay-h100' has x86_64 nodes and the image is aarch64 (it would run emulated there); "
        "expected arch: x86_64 or a site of aarch64 nodes",
    ),
    Case(
        "x86-64-image-for-an-aarch64-site",
        "targets/h100-cuda.yaml",
        replace("sites: [jean-zay-h100]", "sites: [jean-zay-h100, roihu]"),
        line_with("sites: [jean-zay-h100, roihu]"),
        "sites.1: site 'roihu' has aarch64 nodes and the image is x86_64",
    ),
    Case(
        "unknown-cpu-arch",
        "targets/gh200-cuda.yaml",
        replace("arch: aarch64", "arch: arm64"),
        line_with("arch: arm64"),
        "arch",
    ),
    Case(
        "plugin-source-not-in-versions",
        "targets/lumi-rocm64.yaml",
        replace("  plugin: aws-ofi-nccl-1.18\n", "  plugin: aws-ofi-nccl-9\n"),
        line_with("plugin: aws-ofi-nccl-9"),
        "comm.plugin: unknown source 'aws-ofi-nccl-9'; expected one of the sources in ",
    ),
    Case(
        "site-image-on-a-site-without-one",
        "targets/local-image.yaml",
        content(
            b"description: on local's image\nsites: [local]\nsite_image: true\npython: {}\n"
            b"torch: {flavour: cpu}\ndeepspeed: {accelerator: cpu}\ncomm: {library: gloo}\nmpi: {abi: openmpi}\n"
        ),
        line_with("site_image: true"),
        "site_image: site 'local' names no image of its own; expected a site_image section in its file",
    ),
    Case(
        "site-image-path-relative",
        "sites/lumi.yaml",
        replace("site_image:\n  path: /appl/local/laifs/", "site_image:\n  path: appl/local/laifs/"),
        line_with("path: appl/local"),
        "the absolute path of the site's image file",
    ),
    # Enums and patterns.
    Case(
        "flavour-enum",
        "targets/cpu.yaml",
        replace("flavour: cpu", "flavour: tpu"),
        line_with("flavour: tpu"),
        "expected one of: cpu, cuda, rocm; found the text 'tpu'",
    ),
    Case(
        "arch-pattern",
        "sites/puhti.yaml",
        replace("arch: [sm_70]", "arch: [sm70]"),
        line_with("arch: [sm70]"),
        "a GPU arch such as sm_80",
    ),
    Case(
        "commit-too-short",
        "versions.yaml",
        replace("commit: 86ebeaf59a2348b22780023effdb682503747de7", "commit: 86ebeaf59a"),
        line_with("commit: 86ebeaf59a"),
        "a full 40-digit git commit id",
    ),
    Case(
        "source-as-tarball",
        "versions.yaml",
        replace(
            "git: https://github.com/ofiwg/libfabric.git",
            "url: https://github.com/ofiwg/libfabric/archive/v2.1.0.tar.gz",
        ),
        line_with("  libfabric:"),
        "missing required key 'git'",
    ),
    Case(
        "wavefront-missing",
        "sites/lumi.yaml",
        replace("  wavefront_size: 64", "  # no wavefront"),
        2,
        "expected 64 for CDNA",
    ),
    Case(
        "wavefront-on-nvidia",
        "sites/puhti.yaml",
        replace("arch: [sm_70]", "arch: [sm_70]\n  wavefront_size: 32"),
        line_with("wavefront_size: 32"),
        "an AMD setting",
    ),
    Case(
        "libfabric-host-without-paths",
        "sites/lumi.yaml",
        lambda data: drop_block("  host_libfabric:")(replace("  libfabric: image", "  libfabric: host")(data)),
        line_with("network:"),
        "host_libfabric",
    ),
    Case(
        "image-libfabric-not-built",
        "targets/lumi-rocm.yaml",
        replace("  libfabric: cxi", "  libfabric: distro"),
        line_with("comm:"),
        "comm.libfabric: cxi",
    ),
    Case(
        "driver-as-number",
        "versions.yaml",
        replace('"13": 580.65.06', '"13": 580'),
        line_with('"13": 580'),
        "expected a driver version such as 525.60.13, found the number 580",
    ),
    # YAML syntax: the line to fix is the one with the unclosed bracket / the bad indent.
    Case(
        "yaml-unclosed-bracket",
        "targets/cpu.yaml",
        replace("sites: [local]", "sites: [local"),
        line_with("sites: [local"),
        "YAML syntax error",
    ),
    Case(
        "yaml-unclosed-bracket-at-end",
        "targets/cpu.yaml",
        replace("  mpi4py: true", "  mpi4py: [true"),
        line_with("mpi4py: [true"),
        "YAML syntax error",
    ),
    Case(
        "yaml-bad-indentation",
        "targets/cpu.yaml",
        replace("    final: [hostname]", "   final: [hostname]"),
        line_with("   final: [hostname]"),
        "YAML syntax error",
    ),
    # Duplicate keys: PyYAML keeps the last silently; the builder must refuse.
    Case(
        "duplicate-top-level-key",
        "targets/cpu.yaml",
        lambda data: data + b"sites: [local]  # again\n",
        line_with("# again"),
        "duplicate key 'sites' (first at line 2)",
    ),
    Case(
        "duplicate-nested-key",
        "targets/cpu.yaml",
        replace("  skip:\n", "  skip:\n    deepspeed_ccl_comm: first\n"),
        line_with("deepspeed_ccl_comm: needs"),
        "duplicate key 'deepspeed_ccl_comm'",
    ),
    # Files that are not YAML mappings at all.
    Case("empty-file", "versions.yaml", content(b""), 1, "empty file"),
    Case("only-comments", "sites/local.yaml", content(b"# nothing here\n# yet\n"), 1, "no YAML content"),
    Case("binary-file", "targets/cpu.yaml", content(b"\x7fELF\x02\x01\x01\x00\x00\x00\xff\n"), 1, "binary data"),
    # Latin-1 on line 7: the line number must point at the bad byte, not at line 1.
    Case(
        "not-utf8",
        "targets/cpu.yaml",
        replace("family: debian", b"family: deb\xe9ian"),
        line_with(b"deb\xe9ian"),
        "not UTF-8",
    ),
    Case(
        "top-level-list",
        "deepspeed-ops.yaml",
        content(b"- async_io\n- cpu_adam\n"),
        1,
        "expected a mapping at the top level, found a list",
    ),
    # Cross-file references that do not resolve.
    Case(
        "unknown-site",
        "targets/cpu.yaml",
        replace("sites: [local]", "sites: [local, nowhere]"),
        line_with("nowhere"),
        "unknown site 'nowhere'",
    ),
    Case(
        "unknown-deepspeed-op",
        "targets/cpu.yaml",
        replace("  skip:\n", "  skip:\n    cpu_adamw: typo\n"),
        line_with("cpu_adamw"),
        "'cpu_adamw' is not a DeepSpeed op",
    ),
    Case(
        "skip-placeholder-op",
        "targets/cpu.yaml",
        replace("  skip:\n", "  skip:\n    deepspeed_not_implemented: no sources\n"),
        line_with("deepspeed_not_implemented"),
        "is a placeholder that is never prebuilt",
    ),
    Case(
        "skip-without-reason",
        "targets/cpu.yaml",
        replace("deepspeed_ccl_comm: needs Intel", "deepspeed_ccl_comm: false  # needs Intel"),
        line_with("deepspeed_ccl_comm: false"),
        "expected the reason this op is not prebuilt",
    ),
    Case(
        "extends-unknown-target",
        "targets/h100-cuda.yaml",
        replace("extends: a100-cuda", "extends: vista-cuda"),
        line_with("extends:"),
        "unknown target 'vista-cuda'",
    ),
    # csc-cuda already extends v100-cuda; v100-cuda extending csc-cuda closes the loop.
    Case("extends-loop", "targets/v100-cuda.yaml", prepend("extends: csc-cuda\n"), line_with("extends:"), "loop"),
    Case(
        "extends-an-alias",
        "targets/h100-cuda.yaml",
        replace("extends: a100-cuda", "extends: mahti-cuda"),
        line_with("extends:"),
        "'mahti-cuda' is an alias of 'a100-cuda'",
    ),
    Case(
        "alias-of-unknown-target",
        "targets/puhti-cuda.yaml",
        replace("alias_of: v100-cuda", "alias_of: v200-cuda"),
        line_with("alias_of:"),
        "unknown target 'v200-cuda'",
    ),
    Case(
        "alias-with-its-own-recipe",
        "targets/puhti-cuda.yaml",
        lambda data: data + b"sites: [puhti]\n",
        line_with("sites:"),
        "an alias takes only alias_of and description",
    ),
    Case(
        "unknown-image",
        "targets/cpu.yaml",
        replace(
            "build: {bootstrap: debootstrap, image: debian-bookworm}",
            "build: {bootstrap: debootstrap, image: debian-sid}",
        ),
        line_with("debian-sid"),
        "unknown image 'debian-sid'",
    ),
    # the nvcc that compiles the ops: a route per CUDA target, checked against the OS
    Case(
        "cuda-target-without-toolkit",
        "targets/a100-cuda.yaml",
        replace("cuda_toolkit: {from: pypi, version: 13.2.2}\n", ""),
        line_with("torch:"),
        "a cuda image needs cuda_toolkit",
    ),
    Case(
        "pypi-toolkit-without-version",
        "targets/a100-cuda.yaml",
        replace("cuda_toolkit: {from: pypi, version: 13.2.2}", "cuda_toolkit: {from: pypi}"),
        line_with("cuda_toolkit:"),
        "expected the cuda-toolkit release torch pins",
    ),
    Case(
        "debian-toolkit-without-non-free",
        "targets/v100-cuda.yaml",
        replace("  components: [main, contrib, non-free]     # nvidia-cuda-toolkit is in non-free\n", ""),
        line_with("os:"),
        "expected os.components to include non-free",
    ),
    Case(
        "toolkit-on-a-cpu-image",
        "targets/cpu.yaml",
        replace("torch:\n  flavour: cpu\n", "torch:\n  flavour: cpu\ncuda_toolkit: {from: pypi, version: 13.2.2}\n"),
        line_with("cuda_toolkit:"),
        "a cpu image has no CUDA toolkit",
    ),
    Case(
        "gcc-as-number",
        "targets/v100-cuda.yaml",
        replace('gcc: "13"', "gcc: 13"),
        line_with("gcc: 13"),
        "a gcc major version such as 13",
    ),
    Case(
        "torch-version-as-number",
        "targets/v100-cuda.yaml",
        replace("  version: 2.10.0\n", "  version: 2.10\n"),
        line_with("version: 2.10"),
        "an exact torch release such as 2.10.0",
    ),
    Case(
        "unpinned-python-package",
        "targets/cpu.yaml",
        replace("packages: [numpy, matplotlib]", "packages: [numpy, matplotlib, scipy]"),
        line_with("scipy"),
        "no pinned version for 'scipy'",
    ),
    # Facts that contradict each other.
    Case(
        "op-for-wrong-accelerator",
        "targets/lumi-rocm.yaml",
        replace("  skip:\n", "  skip:\n    gds: no cuFile on LUMI\n"),
        line_with("gds: no cuFile"),
        "'gds' is not built for rocm images anyway",
    ),
    # jean-zay-v100 is sm_70 (and csc-cuda, which extends v100-cuda, covers it too).
    Case(
        "op-needs-newer-sm",
        "targets/v100-cuda.yaml",
        replace("    cutlass_ops: needs sm_80 and the deepspeed-kernels package\n", ""),
        line_with("deepspeed:"),
        "op 'cutlass_ops' needs sm_80 or newer",
    ),
    Case(
        "mpi-abi-mismatch",
        "targets/cpu.yaml",
        replace("abi: openmpi", "abi: mpich"),
        line_with("abi: mpich"),
        "site 'local' runs openmpi",
    ),
    Case(
        "cuda-image-on-amd-site",
        "targets/h100-cuda.yaml",
        replace("sites: [jean-zay-h100]", "sites: [lumi]"),
        line_with("sites: [lumi]"),
        "a cuda image needs nvidia GPUs",
    ),
    Case(
        "comm-library-mismatch",
        "targets/cpu.yaml",
        replace("library: gloo", "library: nccl"),
        line_with("library: nccl"),
        "a cpu image uses gloo",
    ),
    Case(
        "account-example-off-form",
        "sites/lumi.yaml",
        replace("example: project_465000000", "example: proj_465000000"),
        line_with("example: proj_465000000"),
        "'proj_465000000' does not match the pattern",
    ),
    Case(
        "account-pattern-not-a-regex",
        "sites/lumi.yaml",
        replace("pattern: '^project_[0-9]{9}$'", "pattern: '^project_[0-9'"),
        line_with("pattern: '^project_[0-9'"),
        "not a regular expression",
    ),
    Case(
        "arch-for-wrong-vendor",
        "sites/mahti.yaml",
        replace("arch: [sm_80]", "arch: [gfx90a]"),
        line_with("gfx90a"),
        "does not fit vendor nvidia",
    ),
    # File names: the name is the mistake, so there is no line to point at.
    Case("upper-case-file-name", "targets/CPU.yaml", copy_of("targets/cpu.yaml"), None, "bad file name"),
    Case("yml-suffix", "targets/extra.yml", copy_of("targets/cpu.yaml"), None, "recipes end in .yaml"),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_recipe_mistake_is_one_located_line_and_writes_nothing(work, case):
    tmp_path, recipes, out = work
    line = case.apply(recipes)
    before = snapshot(tmp_path)

    result = render_all(recipes, out)

    # Where: the path as given to --recipes joined with the file, then the line if any.
    where = f"{recipes / case.file}:{line}: " if line else f"{recipes / case.file}: "
    error = assert_bad_input(result, before, tmp_path, out, prefix=f"error: {where}")
    assert case.expect in error


# One recipe mistake of each way of failing (schema, YAML syntax, encoding, cross-file check,
# file name) and two command-line ones: a fresh interpreter must say exactly what main() here says.
FRESH_SAMPLE = ("typo-top-level-key", "yaml-unclosed-bracket", "not-utf8", "unknown-site", "upper-case-file-name")


@pytest.mark.parametrize(
    "case",
    representative.cases(
        {case.id: (case,) for case in CASES if case.id in FRESH_SAMPLE}, keep=["typo-top-level-key", "not-utf8"]
    ),
)
def test_a_fresh_interpreter_says_the_same(work, case):
    tmp_path, recipes, out = work
    case.apply(recipes)
    before = snapshot(tmp_path)
    here = render_all(recipes, out)
    fresh = run_builder("render", "--all", "--recipes", recipes, "--out", out, "--sites-out", sites_out(out))
    assert (fresh.returncode, fresh.stdout, fresh.stderr) == (here.returncode, here.stdout, here.stderr)
    assert_bad_input(fresh, before, tmp_path, out, prefix="error: ")


@pytest.mark.parametrize("args", [["render", "nosuchtarget"], ["show"]], ids=["unknown-target", "usage"])
def test_a_fresh_interpreter_says_the_same_on_the_command_line(args):
    here, fresh = run_cli(*args), run_builder(*args)
    assert (fresh.returncode, fresh.stdout, fresh.stderr) == (here.returncode, here.stdout, here.stderr)
    assert fresh.returncode == 2 and len(fresh.stderr.splitlines()) == 1, fresh.stderr


def test_corpus_ids_are_unique():
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids))


# --- mistakes on the command line -------------------------------------------------------------


def test_render_unknown_target_lists_the_valid_ones(work):
    tmp_path, recipes, out = work
    before = snapshot(tmp_path)
    result = run_cli("render", "nosuchtarget", "--recipes", recipes, "--out", out)
    error = assert_bad_input(result, before, tmp_path, out, prefix="error: ")
    assert "unknown target 'nosuchtarget'" in error
    assert all(name in error for name in TARGETS), error


def test_render_valid_and_unknown_target_writes_not_even_the_valid_one(work):
    # Everything is rendered before anything is written, so cpu.def keeps its old text.
    tmp_path, recipes, out = work
    before = snapshot(tmp_path)
    result = run_cli("render", "cpu", "nosuchtarget", "--recipes", recipes, "--out", out)
    assert "unknown target 'nosuchtarget'" in assert_bad_input(result, before, tmp_path, out, prefix="error: ")


def test_show_unknown_target(work):
    tmp_path, recipes, out = work
    before = snapshot(tmp_path)
    result = run_cli("show", "nosuchtarget", "--recipes", recipes)
    assert "unknown target 'nosuchtarget'" in assert_bad_input(result, before, tmp_path, out, prefix="error: ")


def test_missing_recipes_directory(work):
    tmp_path, _recipes, out = work
    missing = tmp_path / "nonexistent" / "dir"
    before = snapshot(tmp_path)
    result = run_cli("render", "--all", "--recipes", missing, "--out", out)
    assert "recipes directory not found" in assert_bad_input(
        result, before, tmp_path, out, prefix=f"error: {missing}: "
    )


@pytest.mark.parametrize("targets", [[], ["cpu", "--all"]], ids=["neither", "both"])
def test_render_needs_names_or_all_but_not_both(work, targets):
    tmp_path, recipes, out = work
    before = snapshot(tmp_path)
    result = run_cli("render", *targets, "--recipes", recipes, "--out", out)
    assert "--all" in assert_bad_input(result, before, tmp_path, out, prefix="error: ")


def test_out_that_is_a_file(work):
    tmp_path, recipes, out = work
    not_a_dir = out / "cpu.def"
    before = snapshot(tmp_path)
    result = run_cli("render", "--all", "--recipes", recipes, "--out", not_a_dir)
    assert "not a directory" in assert_bad_input(result, before, tmp_path, out, prefix=f"error: {not_a_dir}: ")


# --- the fixture is sound, and a stale file is a failed check, not bad input ------------------


def test_valid_copy_renders_and_then_checks_clean(work):
    _tmp_path, recipes, out = work
    result = render_all(recipes, out)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    # every target's image layer; devel and base of the targets that own theirs (layer_sharing)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [p.name for p in CONTAINERS.glob("*.def")] + [runtime_wheel.current().name]
    )
    assert {f"{name}.def" for name in TARGETS} <= {p.name for p in out.iterdir()}
    assert (out / "cpu.def").read_bytes() != OLD_DEF

    result = run_cli("check", "--recipes", recipes, "--out", out, "--sites-out", sites_out(out))
    assert result.returncode == 0, result.stderr


def test_check_with_stale_file_exits_1(work):
    tmp_path, recipes, out = work
    before = snapshot(tmp_path)
    result = run_cli("check", "--recipes", recipes, "--out", out)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert f"stale: {out / 'cpu.def'} is stale" in result.stderr.splitlines()
    assert result.stderr.splitlines()[-1].startswith("error: ")
    assert snapshot(tmp_path) == before  # check never writes
