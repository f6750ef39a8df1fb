"""Every shell body in every rendered file passes shellcheck (the real one, as sh)."""

import pytest
from conftest import CONTAINERS
from helpers import deffile

from builder import runner

SHELL_SECTIONS = ("post", "test", "runscript", "environment")
# {body: [(target, stage, section), ...]}: a body several targets share (the runtime's install,
# an environment) is checked once, and a failure names every place it is in
PLACES = {}
for path in sorted(CONTAINERS.glob("*.def")):
    for stage in deffile.split(path.read_text()):
        for sec in stage.sections:
            if sec.name in SHELL_SECTIONS:
                PLACES.setdefault(sec.body, []).append((path.stem, stage.header["Stage"], sec.name))


@pytest.mark.parametrize("body", PLACES, ids=["-".join(places[0]) for places in PLACES.values()])
def test_shellcheck_clean(body):
    # Apptainer runs these sections with /bin/sh, so check them as POSIX sh.
    result = runner.run(["shellcheck", "--shell=sh", "--severity=style", "-"], input=body, check=False)
    places = ", ".join(f"{target} {stage} %{kind}" for target, stage, kind in PLACES[body])
    assert result.returncode == 0, f"{places}:\n{result.stdout}"


def test_shellcheck_catches_a_bad_script():
    # guards against a silently passing check (wrong flags, nothing read from stdin)
    result = runner.run(["shellcheck", "--shell=sh", "-"], input="rm -rf $DIR/*\n", check=False)
    assert result.returncode != 0 and "SC2086" in result.stdout


SCRIPTS = [
    "scripts/ensure-debian-packages",
    ".ci/run",
    "builder/host/toolbox-enter.sh",
    "builder/build-guard.sh",
    "wrappers/singularity_wrapper",
] + sorted(str(p.relative_to(CONTAINERS.parent)) for p in (CONTAINERS.parent / "wrappers" / "sites").glob("*.sh"))


@pytest.mark.parametrize("script", SCRIPTS)
def test_repository_scripts_are_shellcheck_clean(script):
    from conftest import ROOT

    result = runner.run(["shellcheck", "--severity=style", str(ROOT / script)], check=False)
    assert result.returncode == 0, result.stdout
