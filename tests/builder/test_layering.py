"""Imports in builder/ point down: each package imports only from lower floors or from
itself, so a shared helper never hides in a stage, no stage reaches back up, and the stages
on one floor (build, export, run, publish) never import one another: what two of them share
lives below both (host/, sbom/, or a module of the bottom floor such as published.py).
Below every floor sit the records the builder shares with the images (runtime/hpcml_contract.py,
runtime/hpcml_facts.py, which is made of hpcml_json.py and hpcml_report.py), imported by name
like any library."""

import ast
import sys

from conftest import ROOT

BUILDER = ROOT / "builder"
# bottom to top; a module not named here sits on the bottom floor (errors, runner, fileio, ...),
# whose modules may import one another, as may values/ (what a value may hold, how it is quoted)
FLOORS = [
    "values",
    "host",
    "recipes",
    "render",
    "sbom",
    "bundle",
    "locking",
    "layerbuild export run publish",
    "cli wrapper_command",
    "__main__",
]


def floor(parts):
    for level, names in enumerate(FLOORS):
        if parts and parts[0] in names.split():
            return level
    return 0


def module_parts(path, builder=BUILDER):
    """builder/run/smoke.py -> ("run", "smoke"); builder/cli/parser.py -> ("cli", "parser")."""
    return path.relative_to(builder).with_suffix("").parts


def imported(path, builder=BUILDER):
    """The builder modules ``path`` imports, as tuples of names below builder/."""
    package = module_parts(path, builder)[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
            elif (node.module or "").split(".")[0] == "builder":
                base = ()
            else:
                continue
            module = tuple(part for part in (node.module or "").split(".") if part)
            base += module[1:] if not node.level else module
            for alias in node.names:
                yield base if base and node.module else base + (alias.name,)
        elif isinstance(node, ast.Import):
            yield from (tuple(a.name.split(".")[1:]) for a in node.names if a.name.startswith("builder."))


def wrong_way(source, target):
    """Up a floor, or across to another package of the same floor (the bottom floor aside)."""
    here, there = floor(source), floor(target)
    return there > here or (there == here > 0 and target[:1] != source[:1])


def upward_imports(builder=BUILDER):
    found = []
    for path in sorted(builder.rglob("*.py")):
        source = module_parts(path, builder)
        found += [
            f"{path.relative_to(builder)} imports {'.'.join(target)}"
            for target in imported(path, builder)
            if wrong_way(source, target)
        ]
    return found


SHARED_RECORDS = {"hpcml_contract", "hpcml_facts"}
# what hpcml_facts is made of: the builder takes them only through it
RECORD_PARTS = {"hpcml_json", "hpcml_report"}


def top_level_imports(path):
    """The top-level names of the absolute imports in ``path``."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            yield node.module.split(".")[0]


def test_the_builder_takes_from_the_runtime_only_the_shared_records_and_by_import():
    runtime = {path.stem for path in (ROOT / "runtime").glob("*.py")} | {"smoke"}
    reached = {name for path in BUILDER.rglob("*.py") for name in top_level_imports(path) if name in runtime}
    assert reached == SHARED_RECORDS
    # no module loaded by its path, where neither this test nor an import graph would see it
    assert [path for path in BUILDER.rglob("*.py") if "spec_from_file_location" in path.read_text()] == []


def test_the_shared_records_import_only_the_standard_library():
    """They sit below the builder's floors and ship alone in each image (with the parts of
    hpcml_facts, which import nothing else either)."""
    for name in SHARED_RECORDS | RECORD_PARTS:
        imports = set(top_level_imports(ROOT / "runtime" / f"{name}.py"))
        outside = imports - sys.stdlib_module_names - {"__future__"} - RECORD_PARTS
        assert outside == set(), name


def test_every_import_in_builder_points_down():
    assert upward_imports() == []


def test_every_package_of_builder_is_on_a_floor():
    """A new stage is placed on purpose: a package no floor names would sit on the bottom
    floor, where nothing guards it."""
    packages = {path.parent.name for path in BUILDER.glob("*/__init__.py")}
    assert packages <= {name for names in FLOORS for name in names.split()}


def test_a_stage_importing_another_stage_is_caught(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "job.py").write_text(
        "from ..publish.placing import MANIFEST\nfrom ..export import oci\nfrom . import job_paths\n"
        "from ..host import sidecar\nfrom .. import published\n"
    )
    assert upward_imports(tmp_path) == ["run/job.py imports publish.placing", "run/job.py imports export"]


def test_an_upward_import_is_caught_in_each_spelling(tmp_path):
    (tmp_path / "host").mkdir()
    (tmp_path / "host" / "images.py").write_text(
        "from ..render.blocks import provenance\n"
        "from ..run import smoke\n"
        "import builder.publish.install\n"
        "from builder.layerbuild.layers import build\n"
        "from .. import errors, cli\n"
        "from . import toolbox\n"
    )
    assert upward_imports(tmp_path) == [
        f"host/images.py imports {name}"
        for name in ("render.blocks", "run", "publish.install", "layerbuild.layers", "cli")
    ]


def test_the_layer_build_takes_renders_plan_not_its_blocks():
    """layerbuild/ reads what render decided (plan, parts' mount names, the wheel) and reads a
    written definition back (def_reader, for the build that runs its steps itself), never a
    block or the definition's text-making."""
    allowed = {"plan", "layer_sharing", "parts", "runtime_wheel", "def_reader"}
    reached = set()
    for path in sorted((BUILDER / "layerbuild").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "render":
                names = node.module.split(".")[1:2] or [alias.name for alias in node.names]
                reached.update(f"render.{name}" for name in names if name not in allowed)
    assert reached == set()


MAX_MODULE_LINES, MAX_FUNCTION_LINES = 300, 60


def too_long(folder):
    """Each module under ``folder`` past MAX_MODULE_LINES and each function past
    MAX_FUNCTION_LINES, as "path: N lines" and "path: name() N lines"."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        text = path.read_text()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            found.append(f"{path.relative_to(folder)}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{path.relative_to(folder)}: {node.name}() {length} lines")
    return found


def test_no_module_or_function_in_builder_grows_past_a_page_or_so():
    """Small modules with one job: a module past 300 lines or a function past 60 is split."""
    assert too_long(BUILDER) == []


def test_no_module_or_function_in_the_runtime_grows_past_a_page_or_so():
    """runtime/ (launchenv, the records, the smoke suite) is held to the builder's limits."""
    assert too_long(ROOT / "runtime") == []


def test_a_module_or_function_past_the_limits_is_named(tmp_path):
    body = "".join(f"    x = {n}\n" for n in range(MAX_FUNCTION_LINES))
    (tmp_path / "long.py").write_text("def f():\n" + body + "\n" * (MAX_MODULE_LINES - MAX_FUNCTION_LINES))
    module, function = MAX_MODULE_LINES + 1, MAX_FUNCTION_LINES + 1
    assert too_long(tmp_path) == [f"long.py: {module} lines", f"long.py: f() {function} lines"]


def test_run_and_render_name_the_type_of_every_target_and_site_and_never_object():
    """A newcomer follows a target or a site through the job plan and the blocks by its type
    (issue 68): every parameter of that name is annotated, and no annotation is `object`."""
    loose = []
    for path in sorted([*(BUILDER / "run").rglob("*.py"), *(BUILDER / "render").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
                loose += [
                    f"{path.relative_to(BUILDER)}: {node.name}({arg.arg})"
                    for arg in args
                    if arg.arg in ("target", "site") and arg.annotation is None
                ]
            annotation = getattr(node, "annotation", None)
            if isinstance(annotation, ast.Name) and annotation.id == "object":
                loose.append(f"{path.relative_to(BUILDER)}:{node.lineno}: object")
    assert loose == []
