"""Every shell body in every rendered file passes shellcheck (the real one, as sh)."""

import pytest
from conftest import CONTAINERS
from helpers import deffile

from builder import runner

SHELL_SECTIONS = ("post", "test", "runscript", "environment")
BODIES = [
    (path.stem, stage.header["Stage"], sec.name, sec.body)
    for path in sorted(CONTAINERS.glob("*.def"))
    for stage in deffile.split(path.read_text())
    for sec in stage.sections
    if sec.name in SHELL_SECTIONS
]


@pytest.mark.parametrize("target, stage, kind, body", BODIES, ids=[f"{t}-{s}-{k}" for t, s, k, _ in BODIES])
def test_shellcheck_clean(target, stage, kind, body):
    # Apptainer runs these sections with /bin/sh, so check them as POSIX sh.
    result = runner.run(["shellcheck", "--shell=sh", "--severity=style", "-"], input=body, check=False)
    assert result.returncode == 0, f"{target} {stage} %{kind}:\n{result.stdout}"


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
