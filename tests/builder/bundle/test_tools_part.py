"""bundle.tools_part: the builder's own distributions in a bundle, so that a host with no
network installs the builder from it: what is pinned, the requirements file and its check,
and (marker tools) a real install with the network cut."""

import hashlib
import platform
import shutil
import subprocess
from importlib import metadata

import pytest
from conftest import ROOT

from builder.bundle import make, tools_part
from builder.errors import ToolError
from builder.host.progress import Progress


def test_the_pins_are_what_the_builder_and_hatchling_need_at_the_versions_installed_here():
    pins = tools_part.pins()
    for name in ("pyyaml", "jsonschema", "jinja2", "hatchling", "cyclonedx-python-lib", "spython", "uv"):
        assert pins[name] == metadata.version(name), name
    # the extra the builder asks of cyclonedx (json-validation) brings jsonschema's format checks
    assert "jsonschema-specifications" in pins and "referencing" in pins
    # hatchling's own, which build the builder
    assert {"packaging", "pathspec", "pluggy", "trove-classifiers"} <= set(pins)
    # neither the builder itself nor its tests' tools
    assert not {"hpc-ml-containers", "pytest", "hypothesis", "ruff", "lupa"} & set(pins)


def _listed(pins):
    return {
        f"tools/python/{name}-{version}.whl": (
            "https://pypi.invalid/x",
            hashlib.sha256(name.encode()).hexdigest(),
            f"{name}=={version}",
        )
        for name, version in pins.items()
    }


def test_the_requirements_pin_every_file_by_sha256_and_the_check_holds_them_to_the_list():
    listed = _listed(tools_part.pins())
    text = tools_part.requirements(listed)
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert len(lines) == len(listed)
    assert f"# python: 3.11 3.12 3.13 3.14, {platform.machine()}-manylinux_2_28\n" in text
    pyyaml = hashlib.sha256(b"pyyaml").hexdigest()
    assert f"pyyaml=={metadata.version('pyyaml')} --hash=sha256:{pyyaml}" in lines
    files = {path: sha256 for path, (_, sha256, _) in listed.items()}
    tools_part.check(files, text)  # as made
    stray = hashlib.sha256(b"another").hexdigest()
    with pytest.raises(ToolError, match=r"^tools/python/extra\.whl: the bundle holds a file tools/requirements\.txt"):
        tools_part.check({**files, "tools/python/extra.whl": stray}, text)
    gone = {path: sha256 for path, sha256 in files.items() if "/pyyaml-" not in path}
    with pytest.raises(ToolError, match=r"^pyyaml: none of its pinned files is in the bundle"):
        tools_part.check(gone, text)


LEFT_OUT = (".venv", ".git", "images", "bundles", "__pycache__", ".hypothesis", ".pytest_cache", ".ruff_cache")


@pytest.mark.tools
def test_the_builder_installs_from_the_bundles_tools_with_the_network_cut(tmp_path):
    """The files are fetched from the pip sources (network); then, in a network namespace with
    no interface at all, `make setup BUNDLE=DIR` in a copy of this checkout makes a venv from
    them alone."""
    bundle = tmp_path / "bundle"
    listed = make._tools(bundle, Progress(), ())
    assert set(listed) - {tools_part.REQUIREMENTS} == {
        p.relative_to(bundle).as_posix() for p in (bundle / "tools/python").iterdir()
    }
    source = tmp_path / "source"  # the checkout as it is, without its venv and outputs
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*LEFT_OUT), symlinks=True)
    venv = tmp_path / "venv"
    script = (
        f"cd {source} && make setup BUNDLE={bundle} VENV={venv} && {venv}/bin/hpcml --version && {venv}/bin/hpcml list"
    )
    done = subprocess.run(["unshare", "--net", "sh", "-c", script], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "\nhpc-ml-containers " in done.stdout and "\n  cpu " in done.stdout
    assert (venv / ".installed").is_file()
