"""host.build_route: which way a host lets `build` run Apptainer, each case from its facts,
and a build refused in one line, before anything is written, where there is none (issue 51)."""

import dataclasses
import subprocess

import pytest
from conftest import RECIPES, run_builder

from builder.errors import SetupError
from builder.host import build_route
from builder.host.build_route import Facts
from builder.host.progress import Progress
from builder.layerbuild import layers
from builder.recipes.tree import RecipeTree

USER = Facts(
    root=False,
    runtime="/usr/bin/apptainer",
    userns=True,
    subids=True,
    setuid=False,
    fakeroot_command=False,
    toolbox_reason="a toolbox needs root (mount namespaces and pivot_root)",
)


def test_a_user_with_namespaces_and_a_subuid_range_builds_with_fakeroot():
    route = build_route.decide(USER)
    assert route.name == "fakeroot" and route.blocker is None
    assert route.detail == "/usr/bin/apptainer --fakeroot: user namespace with this user's /etc/subuid range"


def test_a_setuid_apptainer_maps_the_range_where_namespaces_are_closed_to_users():
    route = build_route.decide(dataclasses.replace(USER, userns=False, setuid=True))
    assert route.name == "fakeroot" and "setuid starter" in route.detail


def test_without_a_subuid_range_apptainer_falls_back_to_a_one_id_namespace():
    route = build_route.decide(dataclasses.replace(USER, subids=False, fakeroot_command=True))
    assert route.name == "fakeroot" and "one-ID user namespace and the fakeroot command" in route.detail
    bare = build_route.decide(dataclasses.replace(USER, subids=False))
    assert "no fakeroot command" in bare.detail


def test_root_builds_as_root_and_a_toolbox_stands_in_for_a_missing_apptainer():
    assert build_route.decide(dataclasses.replace(USER, root=True)).name == "root"
    provisioned = dataclasses.replace(USER, root=True, runtime=None, toolbox_reason=None)
    assert build_route.decide(provisioned).name == "toolbox"


def test_no_namespaces_and_no_setuid_is_one_line_naming_what_the_site_must_allow_and_lumis_way():
    route = build_route.decide(dataclasses.replace(USER, userns=False))
    assert route.name is None and "\n" not in route.blocker
    assert route.blocker.startswith("this host lets you build no image: Apptainer's --fakeroot needs")
    assert "user.max_user_namespaces" in route.blocker and "setuid Apptainer" in route.blocker
    assert "proot" in route.blocker and "cotainr" in route.blocker and "unverified" in route.blocker


def test_no_apptainer_for_a_user_says_to_load_the_sites_module():
    route = build_route.decide(dataclasses.replace(USER, runtime=None))
    assert route.name is None
    assert route.blocker == (
        "no apptainer or singularity on PATH: load the site's module (module load apptainer) or have "
        "Apptainer 1.1+ installed; a toolbox needs root (mount namespaces and pivot_root)"
    )


def test_a_build_without_a_route_stops_before_anything_is_written(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(build_route, "facts", lambda site=None: dataclasses.replace(USER, userns=False))
    images = tmp_path / "images"
    with pytest.raises(SetupError) as error:
        layers.build(RecipeTree(RECIPES), "cpu", images=images, progress=Progress(), space_check=False)
    assert error.value.exit_status == 2 and "lets you build no image" in str(error.value)
    assert not images.exists() and not (tmp_path / "cache").exists()


def test_the_facts_of_this_host_are_read_without_failing():
    facts = build_route.facts()
    # this machine: user namespaces open (unshare -U -r), as the kernel and `unshare` say
    unshared = subprocess.run(["unshare", "--user", "--map-root-user", "true"], capture_output=True, check=False)
    assert facts.userns is (unshared.returncode == 0)


def test_doctor_names_the_route():
    result = run_builder("doctor")
    assert result.returncode == 0, result.stderr
    row = next(line for line in result.stdout.splitlines() if line.startswith("build route"))
    assert row.split(None, 2)[2] == build_route.decide(build_route.facts()).detail


def test_a_setuid_starter_is_found_where_source_and_distribution_installs_put_it(tmp_path):
    for prefix, starter in (
        ("opt/apptainer", "libexec/apptainer/bin/starter-suid"),
        ("usr", "lib/x86_64-linux-gnu/apptainer/bin/starter-suid"),
    ):
        (tmp_path / prefix / starter).parent.mkdir(parents=True)
        (tmp_path / prefix / starter).write_text("")
        (tmp_path / prefix / "bin").mkdir()
        command = tmp_path / prefix / "bin" / "apptainer"
        command.write_text("")
        assert not build_route._setuid_starter(str(command))  # not setuid
        (tmp_path / prefix / starter).chmod(0o4755)  # root owns it: the tests run as root
        assert build_route._setuid_starter(str(command))
