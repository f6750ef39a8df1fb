"""The runtime package (runtime/) as the wheel every image installs: reproducible bytes, and a
key that moves the top layer only. Site facts travel with the wrapper, not in the image."""

import re
import shutil
import zipfile

import pytest
from conftest import CONTAINERS, RECIPES, ROOT, TARGETS, run_builder

from builder import resources
from builder.layerbuild.store import layer_keys
from builder.recipes.tree import RecipeTree
from builder.render import runtime_wheel
from builder.render.definition import render_all
from builder.render.layer_sharing import plan_layers


@pytest.fixture
def runtime_copy(tmp_path, monkeypatch):
    """A copy of runtime/ that the builder uses instead of the real one."""
    copy = tmp_path / "runtime"
    shutil.copytree(ROOT / "runtime", copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(resources, "runtime_source", lambda: copy)
    return copy


def test_the_wheel_is_byte_identical_whatever_the_clock_says(runtime_copy, monkeypatch):
    first = runtime_wheel.current()
    for path in runtime_copy.rglob("*.py"):
        path.touch()  # new mtimes...
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")  # ...and a caller's epoch
    runtime_wheel._build.cache_clear()
    again = runtime_wheel.current()
    assert again.data == first.data and again.sha256 == first.sha256
    assert first.name == "hpc_ml_runtime-0.1.0-py3-none-any.whl"


def test_the_wheel_holds_launchenv_the_contract_and_the_smoke_package_and_nothing_else(runtime_copy):
    (runtime_copy / "smoke" / "__pycache__").mkdir()
    (runtime_copy / "smoke" / "__pycache__" / "cli.cpython-311.pyc").write_bytes(b"\0")
    runtime_wheel._build.cache_clear()
    with zipfile.ZipFile(__import__("io").BytesIO(runtime_wheel.current().data)) as wheel:
        names = wheel.namelist()
    code = sorted(n for n in names if ".dist-info/" not in n)
    top = ["hpcml_contract.py", "hpcml_facts.py", "hpcml_json.py", "hpcml_report.py"]
    top += ["launchenv.py", "launchenv_ranks.py"]
    assert code == top + sorted(f"smoke/{p.name}" for p in (ROOT / "runtime" / "smoke").glob("*.py"))


def test_a_change_to_the_runtime_code_moves_the_top_layer_and_nothing_below(runtime_copy, tree):
    target = tree.target("cpu")
    before = layer_keys(render_all(target), {})
    cli = runtime_copy / "smoke" / "cli.py"
    cli.write_text(cli.read_text() + "\n# a one-line change\n")
    runtime_wheel._build.cache_clear()
    texts = render_all(target)
    after = layer_keys(texts, {})
    assert after["image"] != before["image"]
    assert (after["devel"], after["base"]) == (before["devel"], before["base"])
    assert runtime_wheel.current().sha256 in texts["image"].text


def test_correcting_a_sites_reference_changes_no_definition_and_rebuilds_nothing(tmp_path):
    recipes = tmp_path / "recipes"
    shutil.copytree(RECIPES, recipes)
    site = recipes / "sites" / "local.yaml"
    text = site.read_text()
    assert "busbw_gbs: 0.6," in text
    site.write_text(text.replace("busbw_gbs: 0.6,", "busbw_gbs: 0.9,"))
    before = {name: layer_keys(render_all(RecipeTree(RECIPES).target(name)), {}) for name in ("cpu",)}
    after = {name: layer_keys(render_all(RecipeTree(recipes).target(name)), {}) for name in ("cpu",)}
    assert after == before  # the image is still up to date
    # check agrees: the committed .def files still match; only the wrapper's site file moved
    result = run_builder("check", "--recipes", recipes, "--out", CONTAINERS, "--sites-out", tmp_path / "sites")
    assert "containers/cpu.def" not in result.stderr
    result = run_builder(
        "render", "--all", "--recipes", recipes, "--out", tmp_path / "out", "--sites-out", tmp_path / "sites"
    )
    assert result.returncode == 0, result.stderr
    for path in CONTAINERS.glob("*.def"):
        assert (tmp_path / "out" / path.name).read_text() == path.read_text(), path.name
    assert '"busbw_gbs":0.9' in (tmp_path / "sites" / "local.sh").read_text()


@pytest.mark.parametrize("name", TARGETS)
def test_each_definition_is_a_page_an_admin_can_read(name):
    for layer, plan in plan_layers(RecipeTree(RECIPES), name).items():
        text = (CONTAINERS / plan.file_name).read_text()
        # a page or so besides the locked pins and Debian packages (a line each): the CUDA image
        # layers, whose ops' libaio is installed twice from a lock (build, final), are the
        # longest at about 295 lines
        own = re.sub(r"<<'PIP_LOCK'\n(.*\n)*?PIP_LOCK\n", "<<'PIP_LOCK'\n", text)
        own = re.sub(r"^\s+'?[a-z0-9][a-z0-9+.-]*=[^ ]+'? \\\n", "", own, flags=re.M)  # apt's
        assert len(own.splitlines()) < 300, (name, layer)
        # no source files pasted in (the runtime comes as a wheel): the JSON and the lock's pins
        assert set(re.findall(r"<<'(\w+)'", text)) <= {"IMAGE_JSON", "PIP_LOCK"}, (name, layer)
        assert not re.search(r"^\s*(def|class) \w+", text, re.M), (name, layer)


def test_the_block_writes_image_json_where_the_smoke_suite_reads_it(tree):
    import sys

    from builder import contract
    from builder.render.blocks import runtime

    sys.path.insert(0, str(ROOT / "runtime"))
    from smoke import config

    assert str(config.IMAGE.relative_to(sys.prefix)) == contract.IMAGE_FACTS
    target = tree.target("cpu")
    post = next(part for part in runtime.parts(target) if part.stage == "build").post
    assert f"cat > {target.python.venv}/{contract.IMAGE_FACTS} <<'IMAGE_JSON'" in post
