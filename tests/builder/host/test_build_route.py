"""host.build_route: which way a host lets `build` run Apptainer, each case from its facts,
and a build refused in one line, before anything is written, where there is none (issue 51);
SingularityCE's proot route for the targets on a site's image (issue 67: LUMI's way; no
SingularityCE runs here, so its build under proot is a fact read from its version), and the
builder's own steps under proot where the runtime is Apptainer (`unpacked`), with the probe
that proot translates statx."""

import dataclasses

import pytest
from conftest import RECIPES, run_builder

from builder.errors import RecipeError, SetupError
from builder.host import build_route, route_facts
from builder.host.progress import Progress
from builder.host.route_facts import Facts
from builder.layerbuild import layers
from builder.recipes.tree import RecipeTree

USER = Facts(
    root=False,
    apptainer="/usr/bin/apptainer",
    userns=True,
    subids=True,
    setuid=False,
    fakeroot_command=False,
    toolbox_reason="a toolbox needs root (mount namespaces and pivot_root)",
)


def test_a_user_with_namespaces_and_a_subuid_range_builds_with_fakeroot():
    route = build_route.decide(USER)
    assert isinstance(route, build_route.Fakeroot) and route.fakeroot
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
    provisioned = dataclasses.replace(USER, root=True, apptainer=None, toolbox_reason=None)
    assert build_route.decide(provisioned).name == "toolbox"


def test_no_namespaces_and_no_setuid_is_one_line_naming_what_the_site_must_allow_and_lumis_way():
    route = build_route.decide(dataclasses.replace(USER, userns=False))
    assert route.name is None and "\n" not in route.blocker
    assert route.blocker.startswith("this host lets you build no image: Apptainer's --fakeroot needs")
    assert "user.max_user_namespaces" in route.blocker and "setuid Apptainer" in route.blocker
    assert "proot" in route.blocker and "cotainr" in route.blocker and "SingularityCE 3.11+" in route.blocker


def test_no_apptainer_for_a_user_says_to_load_the_sites_module():
    route = build_route.decide(dataclasses.replace(USER, apptainer=None))
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


def test_doctor_names_the_route():
    result = run_builder("doctor")
    assert result.returncode == 0, result.stderr
    row = next(line for line in result.stdout.splitlines() if line.startswith("build route"))
    assert row.split(None, 2)[2] == build_route.decide(route_facts.facts()).detail


LUMI_LOGIN = dataclasses.replace(
    USER, apptainer="/usr/bin/singularity", userns=False, subids=False, proot="/appl/bin/proot", proot_builds=True
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
    apptainer = dataclasses.replace(LUMI_LOGIN, apptainer="/usr/bin/apptainer", proot_builds=False)
    route = build_route.decide(dataclasses.replace(apptainer, proot_statx=True))
    assert isinstance(route, build_route.Unpacked) and route.runs_steps and route.proot_probe
    assert "unpacks the site's image into your folder" in route.detail and "/appl/bin/proot" in route.detail
    old = build_route.decide(apptainer)
    assert old.name is None and "\n" not in old.blocker
    assert "does not translate statx (proot before 5.2)" in old.blocker and "proot 5.2 or newer" in old.blocker
    bare = build_route.decide(dataclasses.replace(apptainer, proot=None))
    assert bare.name is None and bare.blocker.startswith("this host lets you build no image: Apptainer's")


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


def _argv(route, apptainer="apptainer", squashfs_args=()):
    args = {"MIRROR": "http://m/debian", "BASE": "cpu.base.sif"}
    binds = ["/w/host:/mnt/hpcml-build-host"]
    return route.build_argv(apptainer, args, binds, "/w/apptainer.sif", "cpu.def", squashfs_args)


def test_each_route_writes_its_own_apptainer_command_line():
    tail = ["--build-arg", "BASE=cpu.base.sif", "--build-arg", "MIRROR=http://m/debian",
            "--bind", "/w/host:/mnt/hpcml-build-host", "/w/apptainer.sif", "cpu.def"]  # fmt: skip
    assert _argv(build_route.Root("as root")) == ["apptainer", "build", *tail]
    assert _argv(build_route.Toolbox("the toolbox")) == ["apptainer", "build", *tail]
    assert _argv(build_route.Fakeroot("--fakeroot")) == ["apptainer", "build", "--fakeroot", *tail]
    # SingularityCE takes the proot route only when --fakeroot is not given
    assert _argv(build_route.Proot("under proot"), "singularity") == ["singularity", "build", *tail]
    squashfs = _argv(build_route.Root("as root"), squashfs_args=("-noI", "-noD"))
    assert squashfs[2:4] == ["--mksquashfs-args", "-noI -noD"]


def test_root_without_cap_sys_resource_builds_with_fakeroot_and_doctor_says_why():
    root = dataclasses.replace(USER, root=True, toolbox_reason=None)
    assert not build_route.decide(root).fakeroot and build_route.decide(root).fakeroot_row() == "not needed"
    capless = build_route.decide(dataclasses.replace(root, cap_sys_resource=False))
    assert isinstance(capless, build_route.Root) and "--fakeroot" in _argv(capless)
    assert capless.fakeroot_row() == "needed: no CAP_SYS_RESOURCE in the capability bounding set"
    toolbox = build_route.decide(dataclasses.replace(root, apptainer=None, toolbox_ready=True, cap_sys_resource=False))
    assert isinstance(toolbox, build_route.Toolbox) and toolbox.fakeroot
    assert build_route.decide(USER).fakeroot_row() == "needed: not root"


def test_only_the_routes_without_privilege_need_a_site_image_and_only_unpacked_runs_the_steps():
    routes = [build_route.decide(f) for f in (dataclasses.replace(USER, root=True), USER, LUMI_LOGIN)]
    routes.append(build_route.decide(dataclasses.replace(LUMI_LOGIN, proot_builds=False, proot_statx=True)))
    assert [type(r).__name__ for r in routes] == ["Root", "Fakeroot", "Proot", "Unpacked"]
    assert [r.unprivileged for r in routes] == [False, False, True, True]
    assert [r.runs_steps for r in routes] == [False, False, False, True]
    assert [r.under for r in routes][:2] == ["", ""] and "proot" in routes[2].under
