"""The contract between builder, wrapper and runtime: every `HPCML_*` name the three
programs, the rendered files and the docs use is in one of its three registries (what the image
reads in runtime/hpcml_contract.py, what only a site file carries in builder/render/sitefile.py,
the rest in builder/contract.py), docs/variables.md gives
each with the registry's meaning word for word, and Python code names them only through the
registries. Bash cannot import them, hence the regexes. The runtime's registry holds exactly
what runtime/ reads, so that a name only the builder or the wrapper reads leaves every image
alone.

Names that only tests use stay in tests/ and are not part of the contract: HPCML_TWIN_*
(the site twins' module markers), HPCML_TEST_MULTI_NODE and HPCML_X (what a test's
environment carries through the wrapper)."""

import ast
import re
import shutil
import subprocess
import sys
import tomllib

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "runtime"))
import hpcml_contract  # noqa: E402

from builder import contract  # noqa: E402
from builder.render import sitefile, variable_docs  # noqa: E402

# the builder's own (builder/contract.py, builder/render/sitefile.py): in no image, so outside
# the runtime's registry
BUILDER_ONLY = {**contract.BUILDER_VARIABLES, **sitefile.VARIABLES}
EVERY_VARIABLE = {**contract.VARIABLES, **sitefile.VARIABLES}
RUNTIME = ROOT / "runtime"

NAME = re.compile(r"HPCML_[A-Z0-9_]*[A-Z0-9]")
DESIGN = ROOT / "docs" / "variables.md"  # the page of the HPCML_* variables
# every place a contract name can appear outside tests/
SCANNED = ["builder", "runtime", "wrappers", "containers", "docs", "scripts", "README.md", "Makefile"]
REGISTRY_FILES = (
    ROOT / "runtime" / "hpcml_contract.py",
    ROOT / "builder" / "contract.py",
    ROOT / "builder" / "render" / "sitefile.py",
    ROOT / "builder" / "recipes" / "site_model.py",  # the plain facts the wrapper reads (wrapper_reads)
)


def text_files():
    for top in SCANNED:
        path = ROOT / top
        for file in [path] if path.is_file() else sorted(path.rglob("*")):
            if file.is_file() and "__pycache__" not in file.parts and b"\0" not in file.read_bytes():
                yield file


def design_rows(heading):
    """{first cell: last cell} of the table rows under ``heading`` in docs/variables.md, up to the
    next heading."""
    lines = DESIGN.read_text().splitlines()
    rows = {}
    for line in lines[lines.index(heading) + 1 :]:
        if line.startswith("#"):
            break
        cells = [cell.strip() for cell in line.split("|")[1:-1]]
        if len(cells) >= 2 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[-1]
    return rows


def test_the_registry_is_well_formed():
    for name, meaning in hpcml_contract.VARIABLES.items():
        assert NAME.fullmatch(name), name
        assert meaning and "\n" not in meaning, name
    for name, meaning in hpcml_contract.FILES.items():
        assert meaning and "\n" not in meaning, name
    for name, meaning in BUILDER_ONLY.items():
        assert NAME.fullmatch(name) and name not in hpcml_contract.VARIABLES, name
        assert meaning and "\n" not in meaning, name
    assert not set(contract.BUILDER_VARIABLES) & set(sitefile.VARIABLES)


def test_every_hpcml_name_outside_tests_is_in_the_registry():
    unknown = {}
    for file in text_files():
        for name in set(NAME.findall(file.read_text(errors="replace"))) - {*hpcml_contract.VARIABLES, *BUILDER_ONLY}:
            unknown.setdefault(name, []).append(str(file.relative_to(ROOT)))
    assert not unknown, f"not in runtime/hpcml_contract.py: {unknown}"


def test_the_wrapper_and_the_site_files_use_the_registrys_names():
    used = set()
    for file in (ROOT / "wrappers").rglob("*"):
        if file.is_file():
            used |= set(NAME.findall(file.read_text()))
    # it reads most of the contract; nothing else may appear there
    assert used <= set(EVERY_VARIABLE)
    assert {contract.SITE_FACTS, contract.SITE_FILE, *sitefile.VARIABLES} <= used


def test_design_md_gives_every_variable_with_the_registrys_meaning():
    assert design_rows("## `HPCML_*` variables") == EVERY_VARIABLE


def test_design_md_gives_the_site_files_variables_as_render_sitefile_writes_them():
    """The table is generated (python -m builder.render.variable_docs): a site fact the wrapper
    reads is written once, in render/sitefile.py."""
    text = DESIGN.read_text()
    assert variable_docs.updated(text) == text
    assert variable_docs.updated(text.replace("`--nv`, `--rocm` or empty", "stale")) == text


def test_design_md_names_the_variables_that_cross_into_the_image():
    assert set(design_rows("### Read inside the image")) == set(hpcml_contract.VARIABLES)


def read_by_runtime():
    """The registry's names the code in runtime/ reads (`contract.NAME`, as each module
    imports hpcml_contract)."""
    names = set()
    for path in sorted(RUNTIME.rglob("*.py")):
        if path.name != "hpcml_contract.py":
            tree = ast.parse(path.read_text())
            names |= {
                node.attr
                for node in ast.walk(tree)
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "contract"
            }
    return names


def test_the_runtimes_registry_holds_exactly_what_the_runtime_reads():
    """A name in runtime/hpcml_contract.py is in every image: one the runtime does not read
    would change every image for nothing."""
    constants = {
        name: value for name, value in vars(hpcml_contract).items() if name.isupper() and isinstance(value, str)
    }
    assert set(constants.values()) == {*hpcml_contract.VARIABLES, *hpcml_contract.FILES}
    assert read_by_runtime() == set(constants)


def test_design_md_gives_every_shared_file_with_the_registrys_meaning():
    assert design_rows("### Files they share") == hpcml_contract.FILES


def _docstrings(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                yield first.value


def spelled_out(path):
    """The contract's names ``path`` spells out in code: in strings (docstrings aside) and as
    keyword arguments (dict(os.environ, HPCML_SITE=...))."""
    tree = ast.parse(path.read_text())
    skip = {id(node) for node in _docstrings(tree)}
    texts = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
    ]
    texts += [node.arg for node in ast.walk(tree) if isinstance(node, ast.keyword) and node.arg]
    found = set()
    for name in [*hpcml_contract.VARIABLES, *hpcml_contract.FILES, *BUILDER_ONLY]:
        # whole names only: HPCML_SITE is not HPCML_SITE_FILE, smoke-report not --smoke-report
        pattern = re.compile(rf"(?<![\w-]){re.escape(name)}(?![\w-])")
        found |= {name for text in texts if pattern.search(text)}
    return found


@pytest.mark.parametrize("top", ["builder", "runtime"])
def test_python_code_names_the_contract_only_through_the_registry(top):
    spelled = {}
    for path in sorted((ROOT / top).rglob("*.py")):
        if path not in REGISTRY_FILES and "_data" not in path.parts:
            names = spelled_out(path)
            if names:
                spelled[str(path.relative_to(ROOT))] = sorted(names)
    assert not spelled, f"use the constants of runtime/hpcml_contract.py instead: {spelled}"


def test_a_spelled_out_name_is_caught(tmp_path):
    path = tmp_path / "module.py"
    path.write_text(
        '"""Reads HPCML_SITE and smoke.json (a docstring may say so)."""\n'
        'env = dict(HPCML_APPTAINER="x")\n'
        'report = out / "smoke.json"\n'
        'flag = "--smoke-report"\n'
        'help = f"default ${contract.SITE_FACTS}"\n'
    )
    assert spelled_out(path) == {"HPCML_APPTAINER", "smoke.json"}


def test_the_builder_reads_the_runtimes_registry():
    assert contract.IMAGE_VARIABLES == hpcml_contract.VARIABLES and contract.FILES == hpcml_contract.FILES
    assert contract.VARIABLES == {**hpcml_contract.VARIABLES, **contract.BUILDER_VARIABLES}
    assert (contract.SITE_FACTS, contract.SMOKE_REPORT) == ("HPCML_SITE_FACTS", "smoke.json")
    with pytest.raises(AttributeError):
        contract.NO_SUCH_NAME  # noqa: B018


def test_an_installed_builder_carries_every_file_of_the_runtime_wheel():
    """An installed builder builds the runtime wheel from builder/_data/runtime/ and the two
    shared records, which its wheel carries at the top level (hatch_build.py) where it imports
    them; every file the runtime wheel ships is in one place or the other."""
    import hatch_build

    runtime = tomllib.loads((ROOT / "runtime" / "pyproject.toml").read_text())
    shipped = runtime["tool"]["hatch"]["build"]["targets"]["wheel"]["only-include"]
    builder = tomllib.loads((ROOT / "pyproject.toml").read_text())
    forced = builder["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    for name in shipped:
        if name in hatch_build.SHARED_RECORDS:
            assert f"runtime/{name}" not in forced, f"{name}: force-include would copy it into editable installs"
        else:
            assert forced.get(f"runtime/{name}") == f"builder/_data/runtime/{name}", name
    assert set(hatch_build.SHARED_RECORDS) <= set(shipped)


def checkout_copy(folder):
    """What `hpcml check` reads, copied: the builder, the runtime, the recipes, containers/
    and the site files."""
    for top in ("builder", "runtime", "recipes", "containers", "wrappers"):
        shutil.copytree(ROOT / top, folder / top, ignore=shutil.ignore_patterns("__pycache__", "_data"))
    return folder


def add_variable(registry, name):
    registry.write_text(registry.read_text() + f'\nEXAMPLE = _variable("{name}", "read by the wrapper alone")\n')


def run_in_copy(folder, *args):
    """`python -m builder` of the copy, with nothing of this checkout or its caller's environment."""
    return subprocess.run(
        [sys.executable, "-m", "builder", *args],
        cwd=folder,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(folder), "HOME": str(folder)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_variable_only_the_wrapper_reads_leaves_every_definition_as_it_is(tmp_path):
    """Added to the builder's registry, containers/ still matches the recipes (so the runtime
    wheel, whose hash each image's top layer carries, is unchanged); added to the runtime's,
    every top layer is stale, and nothing below it."""
    builder_side = checkout_copy(tmp_path / "builder-side")
    add_variable(builder_side / "builder" / "contract.py", "HPCML_EXAMPLE")
    result = run_in_copy(builder_side, "check")
    assert result.returncode == 0 and "up to date" in result.stdout, result.stdout + result.stderr

    image_side = checkout_copy(tmp_path / "image-side")
    add_variable(image_side / "runtime" / "hpcml_contract.py", "HPCML_EXAMPLE")
    result = run_in_copy(image_side, "check")
    assert result.returncode != 0, result.stdout
    stale = {line.split()[1] for line in result.stderr.splitlines() if line.startswith("stale: ")}
    definitions = (ROOT / "containers").glob("*.def")
    top_layers = {f"containers/{path.name}" for path in definitions if path.name.count(".") == 1}
    assert stale == top_layers, result.stderr


def test_a_site_fact_the_wrapper_reads_moves_the_site_files_and_no_definition(tmp_path):
    """docs/design.md's price of a site fact: a plain one the wrapper reads is its field in the
    site model (wrapper_reads) and the site file that sets it. With nothing else edited, the
    key is checked as its type, every site file gets its line and no definition moves."""
    copy = checkout_copy(tmp_path / "site-fact")
    model = copy / "builder" / "recipes" / "site_model.py"
    field = "    node_local: str"
    added = '    example: bool = wrapper_reads(False, "HPCML_EXAMPLE", "an example")\n' + field
    model.write_text(model.read_text().replace(field, added, 1))
    lumi = copy / "recipes" / "sites" / "lumi.yaml"
    lumi.write_text(lumi.read_text().replace("\nscratch:\n", "\nscratch:\n  example: true\n", 1))

    result = run_in_copy(copy, "render", "--all")
    assert result.returncode == 0, result.stdout + result.stderr
    wrote = {line.split()[1] for line in result.stdout.splitlines() if line.startswith("wrote ")}
    # the runtime wheel is built, not committed (.gitignore): a new clone's first render writes it
    wrote = {name for name in wrote if not name.endswith(".whl")}
    assert wrote == {f"wrappers/sites/{path.name}" for path in (ROOT / "wrappers" / "sites").glob("*.sh")}
    assert "\nHPCML_EXAMPLE=1\n" in (copy / "wrappers" / "sites" / "lumi.sh").read_text()
    assert "\nHPCML_EXAMPLE=0\n" in (copy / "wrappers" / "sites" / "local.sh").read_text()

    lumi.write_text(lumi.read_text().replace("  example: true\n", "  example: yes please\n", 1))
    result = run_in_copy(copy, "check")
    assert result.returncode == 2, result.stdout + result.stderr
    line = f"{lumi.relative_to(copy)}:"
    assert result.stderr.count("\n") == 1 and line in result.stderr, result.stderr
    assert "scratch.example: expected true or false, found the text 'yes please'" in result.stderr
