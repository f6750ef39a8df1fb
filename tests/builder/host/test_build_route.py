"""host.build_route: which way a host lets `build` run Apptainer, each case from its facts,
and a build refused in one line, before anything is written, where there is none (issue 51);
SingularityCE's proot route for the targets on a site's image (issue 67: LUMI's way; no
SingularityCE runs here, so its build under proot is a fact read from its version), and the
builder's own steps under proot where the runtime is Apptainer (`unpacked`), with the probe
that proot translates statx."""

import dataclasses
import subprocess

import pytest
from conftest import RECIPES, run_builder

from builder.errors import RecipeError, SetupError
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
    assert "proot" in route.blocker and "cotainr" in route.blocker and "SingularityCE 3.11+" in route.blocker


def test_no_apptainer_for_a_user_says_to_load_the_sites_module():
    route = build_route.decide(dataclasses.replace(USER, runtime=None))
    assert route.name is None
    assert route.blocker == (
        "no apptainer or singularity on PATH: load the site's module (module load apptainer) or have "
        "Apptainer 1.1+ installed; a toolbox needs root (mount namespaces and pivot_root)"
    )


def test_a_build_without_a_route_stops_before_anything_is_written(tmp_path, monkeypatch):
    tree = RecipeTree(RECIPES)  # read first: reading recipes keeps its schema checks in the cache
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(build_route, "facts", lambda site=None: dataclasses.replace(USER, userns=False))
    images = tmp_path / "images"
    with pytest.raises(SetupError) as error:
        layers.build(tree, "cpu", images=images, progress=Progress(), space_check=False)
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


LUMI_LOGIN = dataclasses.replace(
    USER, runtime="/usr/bin/singularity", userns=False, subids=False, proot="/appl/bin/proot", proot_builds=True
)


def test_singularityce_with_proot_builds_without_privilege_what_starts_from_an_image():
    route = build_route.decide(LUMI_LOGIN)
    assert route.name == "proot"
    assert route.detail == "/usr/bin/singularity under /appl/bin/proot, no privilege: targets on a site's image only"
    # fakeroot still goes first where the host offers it
    assert build_route.decide(dataclasses.replace(LUMI_LOGIN, userns=True)).name == "fakeroot"


def test_singularityce_without_proot_says_to_load_it():
    route = build_route.decide(dataclasses.replace(LUMI_LOGIN, proot=None))
    assert route.name is None and "\n" not in route.blocker
    assert route.blocker.endswith("proot is on PATH; load it (on LUMI: module load LUMI systools) and retry")


def test_apptainer_with_a_statx_proot_runs_the_steps_itself_and_an_older_proot_is_one_line():
    apptainer = dataclasses.replace(LUMI_LOGIN, runtime="/usr/bin/apptainer", proot_builds=False)
    route = build_route.decide(dataclasses.replace(apptainer, proot_statx=True))
    assert route.name == "unpacked" and route.blocker is None
    assert "unpacks the site's image into your folder" in route.detail and "/appl/bin/proot" in route.detail
    old = build_route.decide(apptainer)
    assert old.name is None and "\n" not in old.blocker
    assert "does not translate statx (proot before 5.2)" in old.blocker and "proot 5.2 or newer" in old.blocker
    bare = build_route.decide(dataclasses.replace(apptainer, proot=None))
    assert bare.name is None and bare.blocker.startswith("this host lets you build no image: Apptainer's")


def _fake_proot(path, binds: bool):
    """A proot stand-in: its -b binds made real by a mount namespace (the tests run as root),
    or ignored (as proot 5.1 leaves statx's path untranslated)."""
    mount = 'mkdir "${bind#*:}" && mount --bind "${bind%%:*}" "${bind#*:}"' if binds else "true"
    unmount = 'umount "${bind#*:}"; rmdir "${bind#*:}"' if binds else "true"  # the mount point too
    path.write_text(
        "#!/bin/bash\n"
        f'if [ -z "${{INSIDE:-}}" ]; then exec env INSIDE=1 unshare -m --propagation private "$0" "$@"; fi\n'
        f'bind="$2"; shift 2; {mount}; "$@"; status=$?; {unmount}; exit $status\n'
    )
    path.chmod(0o755)
    return str(path)


def test_the_statx_probe_tells_a_proot_that_maps_the_path_from_one_that_does_not(tmp_path):
    assert build_route.proot_settings(None) is None
    assert build_route.proot_settings(_fake_proot(tmp_path / "good", binds=True)) == {}
    assert build_route.proot_settings(_fake_proot(tmp_path / "old", binds=False)) is None
    assert not build_route.translates_statx(_fake_proot(tmp_path / "old2", binds=False))
    assert not (build_route.Path("/") / build_route.STATX_PROBE.lstrip("/")).exists()


@pytest.mark.parametrize(
    "said, builds",
    [
        ("singularity-ce version 4.1.3-jammy", True),
        ("singularity-ce version 3.11.0", True),
        ("singularity-ce version 3.10.5", False),
        ("apptainer version 1.4.5", False),
        ("singularity version 3.8.7", False),  # the older Singularity, before the CE/Apptainer split
    ],
)
def test_a_proot_capable_runtime_is_told_by_its_version(tmp_path, said, builds):
    runtime = tmp_path / "singularity"
    runtime.write_text(f"#!/bin/sh\necho '{said}'\n")
    runtime.chmod(0o755)
    assert build_route.builds_under_proot(str(runtime)) is builds
    assert build_route.builds_under_proot(None) is False


def test_under_proot_a_debian_rooted_target_is_refused_in_one_line_and_nothing_is_written(tmp_path, monkeypatch):
    tree = RecipeTree(RECIPES)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(build_route, "facts", lambda site=None: LUMI_LOGIN)
    images = tmp_path / "images"
    with pytest.raises(SetupError) as error:
        layers.build(tree, "lumi-rocm", images=images, progress=Progress(), space_check=False)
    assert error.value.exit_status == 2 and "\n" not in str(error.value)
    assert str(error.value).startswith("lumi-rocm: this host builds only under proot")
    assert "lumi-laif" in str(error.value) and "needs root or --fakeroot" in str(error.value)
    assert not images.exists() and not (tmp_path / "cache").exists()


def test_under_proot_a_target_on_the_sites_image_gets_past_the_route(tmp_path, monkeypatch):
    """lumi-laif passes the route check and stops at the next one: LUMI's image is not here."""
    monkeypatch.setattr(build_route, "facts", lambda site=None: LUMI_LOGIN)
    with pytest.raises(RecipeError) as error:
        layers.build(RecipeTree(RECIPES), "lumi-laif", images=tmp_path / "images", progress=Progress())
    assert "site_image.path" in str(error.value) and "no such file here" in str(error.value)
    assert not (tmp_path / "images").exists()


def test_the_proot_route_builds_without_fakeroot(tmp_path, monkeypatch):
    """SingularityCE takes the proot route only when --fakeroot is not given."""
    from builder.render.layer_sharing import plan_layers

    monkeypatch.setattr(layers.hostinfo, "needs_fakeroot", lambda: True)
    monkeypatch.setattr(layers, "takes_squashfs_args", lambda apptainer: False)
    plan = plan_layers(RecipeTree(RECIPES), "lumi-laif")["image"]
    job = layers.LayerBuild(plan, "singularity", tmp_path / "x.sif", "key", {}, tmp_path / "log")
    argv = layers._argv(job, {}, tmp_path / "host", tmp_path / ".x.sif.tmp", tmp_path / "x.def")
    assert "--fakeroot" in argv
    argv = layers._argv(
        dataclasses.replace(job, route="proot"), {}, tmp_path / "host", tmp_path / ".x.sif.tmp", tmp_path / "x.def"
    )
    assert "--fakeroot" not in argv and argv[:2] == ["singularity", "build"]
