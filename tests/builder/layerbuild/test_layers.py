"""The layer build's logic with the runner swapped for a fake (tests/helpers/fake_runner.py):
which layers are built, in what order, with what arguments, and which are skipped. The real
builds are in test_build.py."""

import io
import platform
import re
import urllib.request
from pathlib import Path

import pytest
from conftest import RECIPES, recipe_tree
from helpers.fake_runner import FakeRunner

from builder import contract, runner
from builder.bundle import toolbox_part
from builder.errors import ToolError
from builder.host import build_route, cross_tools, debootstrap_kit, emulation, hostinfo
from builder.host import pip_indexes as indexes
from builder.host.progress import Progress
from builder.layerbuild import drift, from_bundle, layers
from builder.recipes.tree import RecipeTree
from builder.sbom import lock_check

MIRROR = "http://mirror.invalid/debian"
SECURITY = "http://mirror.invalid/debian-security"
MIRRORS = {"MIRROR": MIRROR, "SECURITY_MIRROR": SECURITY}
TREE = recipe_tree()
CPU_WHEEL = f"torch-{TREE.target('cpu').torch.version}+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
ROCM_TORCH = f"torch-{TREE.target('lumi-rocm').torch.version}+rocm7.0"
REAL_RUN_LOGGED = runner.run_logged  # before the fake runner's fixture swaps it


@pytest.fixture
def fake(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(
        layers.from_bundle.which_apptainer,
        "find_apptainer",
        lambda site, progress, images, mirror=None: ("apptainer", "apptainer (fake)"),
    )
    monkeypatch.setattr(hostinfo, "debian_mirror", lambda: MIRROR)
    monkeypatch.setattr(hostinfo, "security_mirror", lambda: SECURITY)
    monkeypatch.setattr(debootstrap_kit, "host_debootstrap", lambda env_path=None: "/usr/sbin/debootstrap")
    # test_build_route.py tests the route
    monkeypatch.setattr(build_route, "check", lambda site=None, target=None: build_route.Root("as root"))
    monkeypatch.setattr(indexes, "why_down", lambda url, cafile=None: None)  # asks no index
    # the fake image holds one distribution, not its lock's (tests/builder/sbom tests that check)
    monkeypatch.setattr(lock_check, "differences", lambda sbom, lock: [])
    monkeypatch.setattr(lock_check, "deb_differences", lambda sbom, lock: [])
    monkeypatch.setattr(drift, "check", lambda target, down: None)  # asks no source (test_drift.py does)
    monkeypatch.setattr(drift, "check_debian", lambda tree, plans, planned, progress=None: None)
    monkeypatch.setattr(
        hostinfo, "pip_settings", lambda: {"cert": None, "index_url": "", "extra_index_urls": [], "find_links": []}
    )
    return FakeRunner(monkeypatch)


def build(name, images, force=None, tree=None, progress=None):
    return layers.build(
        tree or RecipeTree(RECIPES),
        name,
        images=images,
        force=force,
        progress=progress or Progress(),
        space_check=False,
    )


def test_a_first_build_makes_the_three_layers_in_order_each_from_the_one_before(fake, tmp_path):
    image = build("cpu", tmp_path)
    assert image == tmp_path / "cpu.sif" and image.is_file()
    assert [b.layer for b in fake.builds] == ["devel", "base", "image"]
    devel, base, top = fake.builds
    # parents by file name (the build runs in the images folder); the mirror only where used
    assert devel.build_args == MIRRORS  # debootstrap's mirror, and the security pocket's
    assert base.build_args == {"DEVEL": "cpu.devel.sif", **MIRRORS}  # its final stage: debootstrap
    assert set(top.build_args) == {"DEVEL", "BASE", "RUNTIME_WHEEL"}
    assert (top.build_args["DEVEL"], top.build_args["BASE"]) == ("cpu.devel.sif", "cpu.base.sif")
    # Apptainer writes each uncompressed; packing.py compresses only the image, which users run,
    # and puts the definition as committed in it, the host's values of its arguments named
    assert (devel.uncompressed, base.uncompressed, top.uncompressed) == (True, True, True)
    assert [p.compressed for p in fake.packings] == [False, False, True]
    assert [p.definition for p in fake.packings] == [b.definition for b in fake.builds]
    assert fake.packings[0].host_values == MIRRORS and set(fake.packings[2].host_values) == {"RUNTIME_WHEEL"}
    assert sorted(p.name for p in tmp_path.glob("*.sif")) == ["cpu.base.sif", "cpu.devel.sif", "cpu.sif"]


def test_an_unchanged_target_starts_no_build_and_a_forced_top_rebuilds_only_the_image(fake, tmp_path, capsys):
    build("cpu", tmp_path)
    fake.builds.clear()
    build("cpu", tmp_path)
    assert fake.builds == [] and "is up to date" in capsys.readouterr().out
    build("cpu", tmp_path, force="top")
    assert [b.layer for b in fake.builds] == ["image"]


def test_a_lost_layer_comes_back_from_the_cache_without_a_build(fake, tmp_path):
    build("cpu", tmp_path)
    (tmp_path / "cpu.base.sif").unlink()
    (tmp_path / "cpu.sif").unlink()
    fake.builds.clear()
    build("cpu", tmp_path)
    assert fake.builds == []  # both taken from the user's layer cache
    assert (tmp_path / "cpu.base.sif").read_text() == "fake image of cpu.base.def\n"


def test_a_target_sharing_lower_layers_builds_them_under_their_owners_names(fake, tmp_path):
    build("h100-cuda", tmp_path)
    owners = [Path(b.argv[-1]).name.split(".")[0] for b in fake.builds]
    assert owners == ["a100-cuda", "a100-cuda", "h100-cuda"]
    assert fake.builds[2].build_args["BASE"] == "a100-cuda.base.sif"
    fake.builds.clear()
    build("a100-cuda", tmp_path)  # its lower layers are there already
    assert [b.layer for b in fake.builds] == ["image"]


def test_a_child_built_after_its_parent_builds_only_its_image_layer_and_says_on_what(fake, tmp_path):
    """As cpu-child on the CPU image's layers (for real: make test-full, test_layer_sharing)."""
    build("a100-cuda", tmp_path)
    fake.builds.clear()
    said = io.StringIO()
    build("h100-cuda", tmp_path, progress=Progress(said))
    assert [(b.layer, Path(b.argv[-1]).name) for b in fake.builds] == [("image", "h100-cuda.def")]
    assert fake.builds[0].build_args["BASE"] == "a100-cuda.base.sif"
    assert "h100-cuda builds on the devel and base layers of a100-cuda" in said.getvalue(), said.getvalue()
    assert sorted(p.name for p in tmp_path.glob("h100-cuda*.sif")) == ["h100-cuda.sif"]


def test_the_build_is_given_the_plans_text_and_nothing_else(fake, tmp_path):
    from builder.render.layer_sharing import plan_layers

    build("cpu", tmp_path)
    plans = plan_layers(RecipeTree(RECIPES), "cpu")
    assert [b.definition for b in fake.builds] == [plans[layer].text for layer in ("devel", "base", "image")]


def test_a_layer_built_with_its_index_left_out_is_not_reused_once_the_index_answers(fake, monkeypatch, tmp_path):
    """The torch index down: pip took torch from wherever else it could (PyPI, local wheels),
    so that devel layer must not stand for the one the recipe asks for when the index is back."""
    torch_index = "https://download.pytorch.org/whl/cpu"
    monkeypatch.setattr(indexes, "why_down", _down(torch_index))
    wheels = tmp_path / "wheels"  # as on this project's machines: the CPU torch from a local folder
    wheels.mkdir()
    (wheels / CPU_WHEEL).write_text("")
    settings = {"cert": None, "index_url": "", "extra_index_urls": [], "find_links": [str(wheels)]}
    monkeypatch.setattr(hostinfo, "pip_settings", lambda: settings)
    build("cpu", tmp_path)
    fake.builds.clear()
    build("cpu", tmp_path)
    assert fake.builds == []  # still down: the same layers are current
    monkeypatch.setattr(indexes, "why_down", lambda url, cafile=None: None)
    build("cpu", tmp_path)
    # the devel layer is built again (not taken from the cache), and so is all that starts from it
    assert [b.layer for b in fake.builds] == ["devel", "base", "image"]
    fake.builds.clear()
    monkeypatch.setattr(indexes, "why_down", _down(torch_index))
    build("cpu", tmp_path)
    assert [b.layer for b in fake.builds] == []  # down again: the first build's layers, from the cache


ROCM_INDEX = "https://download.pytorch.org/whl/rocm7.0"


def _down(*prefixes, reason="no answer"):
    """A why_down where the URLs starting with one of ``prefixes`` do not answer."""
    return lambda url, cafile=None: reason if url.startswith(prefixes) else None


def test_a_locked_file_no_longer_served_stops_the_build_before_anything_is_written(fake, monkeypatch, tmp_path):
    asked = []

    def drifted(target, down):
        asked.append(target.name)
        raise ToolError("regex 2026.11.19, locked in recipes/locks/cpu/python.txt (step frameworks), is not served")

    monkeypatch.setattr(drift, "check", drifted)
    with pytest.raises(ToolError, match="^regex 2026.11.19, locked in"):
        build("cpu", tmp_path / "images")
    assert asked == ["cpu"] and fake.builds == []
    assert not (tmp_path / "images").exists() or not list((tmp_path / "images").iterdir())


def test_a_torch_whose_index_does_not_answer_stops_the_build_before_anything_is_written(fake, monkeypatch, tmp_path):
    monkeypatch.setattr(indexes, "why_down", _down(ROCM_INDEX))
    monkeypatch.setattr(indexes, "lists", lambda url, project, prefix, cafile=None: False)
    images = tmp_path / "images"
    expected = r"rocm7\.0 does not answer \(no answer\).* holds " + re.escape(ROCM_TORCH) + ";"
    with pytest.raises(ToolError, match=expected):
        build("lumi-rocm", images)
    assert fake.builds == [] and fake.commands == [] and not images.exists()


def test_a_local_wheel_or_a_mirror_stands_in_for_the_torch_index(fake, monkeypatch, tmp_path):
    torch_index = "https://download.pytorch.org/whl/cpu"
    monkeypatch.setattr(indexes, "why_down", _down(torch_index))
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / CPU_WHEEL).write_text("")
    settings = {"cert": None, "index_url": "", "extra_index_urls": [], "find_links": [str(wheels)]}
    monkeypatch.setattr(hostinfo, "pip_settings", lambda: settings)
    build("cpu", tmp_path / "a")
    assert [b.layer for b in fake.builds] == ["devel", "base", "image"]
    # a mirror that lists the wheel serves as well; one that does not, does not
    mirror = "https://pypi-mirror.invalid/simple"
    settings.update(find_links=[], extra_index_urls=[mirror])
    monkeypatch.setattr(indexes, "lists", lambda url, project, prefix, cafile=None: url == mirror)
    build("cpu", tmp_path / "b", force="all")
    monkeypatch.setattr(indexes, "lists", lambda url, project, prefix, cafile=None: False)
    with pytest.raises(ToolError, match=re.escape(CPU_WHEEL.split("-cp")[0])):
        build("cpu", tmp_path / "c", force="all")


# --- a failed layer build: the reason a block gave, in one line ------------------------------

REASON = "the frameworks need other versions of packages the layers below pinned (numpy==2.4.6)"
# what Apptainer writes when %post fails, sh -x tracing it (apptainer build: "+ " lines)
FAILED_POST = f"""+ echo '--- build: frameworks'
--- build: frameworks
ERROR: Cannot install lightning==2.6.6 because these package versions have conflicting dependencies.
+ echo '{contract.FAILURE_MARKER}{REASON}'
{contract.FAILURE_MARKER}{REASON}
+ exit 1
FATAL:   While performing build: while running engine: exit status 1
"""


@pytest.mark.parametrize("marked", [True, False], ids=["marked", "unmarked"])
def test_a_failed_layer_build_reports_the_marked_line_alone(fake, monkeypatch, tmp_path, marked):
    """The real run_logged runs a stand-in apptainer that fails as a %post does; with a marked
    line in its log, that line is the whole error; without one, the log's last lines as ever."""
    log_text = FAILED_POST if marked else FAILED_POST.replace(contract.FAILURE_MARKER, "")
    apptainer = tmp_path / "apptainer"
    apptainer.write_text(f"#!/bin/sh\ncat <<'EOF'\n{log_text}EOF\nexit 255\n")
    apptainer.chmod(0o755)
    monkeypatch.setattr(
        layers.from_bundle.which_apptainer,
        "find_apptainer",
        lambda site, progress, images, mirror=None: (str(apptainer), "apptainer (fake)"),
    )
    monkeypatch.setattr(runner, "run_logged", REAL_RUN_LOGGED)
    images = tmp_path / "images"
    with pytest.raises(ToolError) as caught:
        build("cpu", images)
    log = images / "cpu.devel.build.log"
    if marked:
        assert str(caught.value) == f"{REASON}; the previous image, if any, is unchanged; log: {log}"
    else:
        message = str(caught.value)
        assert message.startswith("apptainer build failed (exit status 255)") and "FATAL:" in message
    assert not list(images.glob("*.sif"))


def _refused_lumi_build(fake, monkeypatch, tmp_path, *silent):
    """The one-line error of a lumi-rocm build where the URLs starting with ``silent`` do not
    answer, having checked that it built and wrote nothing."""
    monkeypatch.setattr(indexes, "why_down", _down(*silent, reason="no route to host"))
    images = tmp_path / "images"
    with pytest.raises(ToolError) as error:
        build("lumi-rocm", images)
    assert fake.builds == [] and not images.exists()
    return str(error.value)


def test_a_build_whose_base_registry_does_not_answer_stops_before_it_writes(fake, monkeypatch, tmp_path):
    message = _refused_lumi_build(fake, monkeypatch, tmp_path, "https://registry-1.docker.io/")
    assert message.startswith("registry-1.docker.io does not answer (no route to host): the devel layer of lumi-rocm ")
    assert "docker://rocm/dev-ubuntu-24.04:7.0.2-complete;" in message and "\n" not in message


def test_a_build_whose_git_source_does_not_answer_stops_before_it_writes(fake, monkeypatch, tmp_path):
    # the registry answers
    message = _refused_lumi_build(fake, monkeypatch, tmp_path, "https://github.com/aws/")
    assert message.startswith("https://github.com/aws/aws-ofi-nccl.git does not answer (no route to host): ")
    assert "the devel layer of lumi-rocm fetches aws-ofi-nccl's pinned commit" in message and "\n" not in message


def test_a_build_asks_only_for_the_sources_of_the_layers_it_builds(fake, monkeypatch, tmp_path):
    asked = []
    monkeypatch.setattr(indexes, "why_down", lambda url, cafile=None: asked.append(url))
    build("lumi-rocm", tmp_path)
    assert "https://registry-1.docker.io/v2/" in asked
    assert "https://github.com/aws/aws-ofi-nccl.git/info/refs?service=git-upload-pack" in asked
    fake.builds.clear()
    (tmp_path / "lumi-rocm.sif").unlink()
    # only the image layer to make again: it starts from base and fetches nothing
    monkeypatch.setattr(indexes, "why_down", _down("https://registry-1.docker.io/", "https://github.com/"))
    build("lumi-rocm", tmp_path, force="top")
    assert [b.layer for b in fake.builds] == ["image"]


# --- issue 34: an image of another architecture than the host's ---------------------------


def test_an_aarch64_image_is_built_on_its_own_roots_with_qemu_ready_and_preflight_told(fake, monkeypatch, tmp_path):
    monkeypatch.setattr(emulation, "host_arch", lambda: "x86_64")
    monkeypatch.setattr(emulation, "state", lambda arch: ("ready", "registered (fake)"))
    cross = tmp_path / "cross-root"  # host.cross_tools' own tests make one
    monkeypatch.setattr(cross_tools, "ensure", lambda target, progress: cross)
    newer = []  # its QEMU, registered before the first layer builds
    monkeypatch.setattr(emulation, "use_newer", lambda arch, qemu: newer.append((arch, qemu, len(fake.builds))))
    build("gh200-cuda", tmp_path)
    assert newer == [("aarch64", cross / "usr/libexec/qemu-binfmt/aarch64-binfmt-P", 0)]
    assert [b.layer for b in fake.builds] == ["devel", "base", "image"]
    devel, base, top = fake.builds
    # its own devel and base (a100-cuda's are x86_64), each a Debian root made for arm64
    assert sorted(p.name for p in tmp_path.glob("*.sif")) == [
        "gh200-cuda.base.sif",
        "gh200-cuda.devel.sif",
        "gh200-cuda.sif",
    ]
    for layer in (devel, base):
        assert "Bootstrap: scratch\n" in layer.definition and "Bootstrap: debootstrap" not in layer.definition
        assert 'debootstrap --arch=arm64 --variant=minbase --include=apt trixie "$APPTAINER_ROOTFS" {{ MIRROR }}' in (
            layer.definition
        )
        assert layer.build_args["MIRROR"] == MIRROR
    # %test's preflight knows the build runs emulated, and says so instead of failing
    assert all(b.env.get(contract.ALLOW_EMULATION) == "1" for b in fake.builds)
    # the top layer compiles DeepSpeed's ops with the x86-64 compilers, bound read-only where
    # its DeepSpeed step looks, and seen by a toolbox; the layers below compile nothing
    binds = [value for flag, value in zip(top.argv, top.argv[1:]) if flag == "--bind"]
    assert binds[1:] == [f"{cross}:/mnt/cross:ro"] and binds[0].endswith(":/mnt")
    assert str(cross) in top.env[contract.TOOLBOX_BINDS].split(":")
    assert '. "$cross/enter.sh"' in top.definition
    assert not any("/mnt/cross" in " ".join(b.argv) for b in (devel, base))


def test_without_qemu_an_aarch64_build_stops_in_one_line_before_anything_runs(fake, monkeypatch, tmp_path):
    monkeypatch.setattr(emulation, "host_arch", lambda: "x86_64")
    monkeypatch.setattr(
        emulation,
        "state",
        lambda arch: ("missing", "no QEMU user-mode emulator for aarch64: apt-get install qemu-user-static"),
    )
    with pytest.raises(ToolError) as error:
        build("gh200-cuda", tmp_path / "images")
    assert str(error.value).endswith("apt-get install qemu-user-static") and "\n" not in str(error.value)
    assert fake.commands == [] and not (tmp_path / "images").exists()


def test_an_x86_64_image_is_refused_on_an_aarch64_host_whose_roots_would_be_aarch64(fake, monkeypatch, tmp_path):
    monkeypatch.setattr(emulation, "host_arch", lambda: "aarch64")
    with pytest.raises(ToolError) as error:
        build("cpu", tmp_path / "images")
    assert str(error.value) == (
        "cpu is an x86_64 image and its stages (debootstrap bookworm, debootstrap bookworm) start from a root "
        "of this host's architecture (aarch64); build it on an x86_64 host"
    )
    assert fake.commands == []


def test_a_native_build_runs_without_the_emulation_opt_in(fake, tmp_path):
    build("cpu", tmp_path)
    assert all(contract.ALLOW_EMULATION not in b.env for b in fake.builds)


def test_a_host_without_debootstrap_gets_the_builders_own_first_on_path_where_a_layer_needs_it(
    fake, monkeypatch, tmp_path
):
    kit = tmp_path / "kit" / "bin"
    monkeypatch.setattr(debootstrap_kit, "host_debootstrap", lambda env_path=None: None)
    monkeypatch.setattr(debootstrap_kit, "kit_bin", lambda progress, mirror=None: kit)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    build("cpu", tmp_path)
    devel, base, top = fake.builds
    # devel and base start from debootstrap (base's final stage); the image from the base layer
    assert devel.env["PATH"] == base.env["PATH"] == f"{kit}:/usr/bin:/bin"
    assert top.env["PATH"] == "/usr/bin:/bin"


def test_the_toolbox_brings_its_own_debootstrap_so_the_kit_is_not_fetched(fake, monkeypatch, tmp_path):
    monkeypatch.setattr(
        layers.from_bundle.which_apptainer,
        "find_apptainer",
        lambda site, progress, images, mirror=None: ("apptainer", "toolbox"),
    )
    monkeypatch.setattr(debootstrap_kit, "host_debootstrap", lambda env_path=None: None)
    monkeypatch.setattr(debootstrap_kit, "kit_bin", lambda progress, mirror=None: pytest.fail("fetched the kit"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    build("cpu", tmp_path)
    assert {b.env["PATH"] for b in fake.builds} == {"/usr/bin:/bin"}


def test_on_an_aarch64_host_gh200_builds_natively_without_qemu_or_the_x86_64_compilers(fake, monkeypatch, tmp_path):
    """Roihu's GPU login nodes (issue 51): the same definitions, their debootstrap --arch=arm64
    native, no emulator registered and no cross compilers made or bound."""
    monkeypatch.setattr(emulation, "host_arch", lambda: "aarch64")
    monkeypatch.setattr(emulation, "ensure", lambda arch: pytest.fail("asked for QEMU"))
    monkeypatch.setattr(emulation, "use_newer", lambda arch, qemu: pytest.fail("registered a QEMU"))
    build("gh200-cuda", tmp_path)
    assert not (tmp_path / "cache" / "hpc-ml-containers" / "cross").exists()  # no x86-64 compilers made
    assert [b.layer for b in fake.builds] == ["devel", "base", "image"]
    rendered = {p.name: p.read_text() for p in (RECIPES.parent / "containers").glob("gh200-cuda*.def")}
    for built, name in zip(fake.builds, ("gh200-cuda.devel.def", "gh200-cuda.base.def", "gh200-cuda.def")):
        assert built.definition == rendered[name]  # the committed files: nothing host-made
        assert contract.ALLOW_EMULATION not in built.env
        assert "/mnt/cross" not in " ".join(built.argv)


def test_a_build_from_a_bundle_asks_no_source_and_takes_every_file_from_it(fake, tmp_path, monkeypatch):
    bundle = tmp_path / "bundle"
    for folder in ("debian", "debian-security", "python"):
        (bundle / folder).mkdir(parents=True)
    (bundle / "debian" / "InRelease").write_text("signed\n")
    (bundle / "debian-security" / "InRelease").write_text("signed too\n")
    served = {"debian/InRelease": "0" * 64, "debian-security/InRelease": "1" * 64}
    served[toolbox_part.lock_path(platform.machine())] = "2" * 64  # a toolbox too: made from it if need be
    monkeypatch.setattr(from_bundle.make, "checked", lambda tree, name, folder: served)
    for module, name in ((drift, "check"), (drift, "check_debian"), (indexes, "why_down")):
        monkeypatch.setattr(module, name, lambda *a, **k: pytest.fail("asked a source"))
    seen = []  # (settings file, what the mirror answers) while each layer builds
    recording = runner.run_logged

    def run_logged(argv, log_path, **options):
        if argv[1] != "build":  # the SBOM's unsquashfs
            return recording(argv, log_path, **options)
        host = next(v.split(":")[0] for f, v in zip(argv, argv[1:]) if f == "--bind" and v.endswith(":/mnt"))
        mirror = [v.split("=", 1)[1] for f, v in zip(argv, argv[1:]) if f == "--build-arg" and "MIRROR=" in v]
        answers = []
        for url in mirror:
            with urllib.request.urlopen(f"{url}/InRelease", timeout=10) as answer:
                answers.append(answer.read())
        seen.append((Path(host, "hpcml-build-host.sh").read_text(), answers))
        return recording(argv, log_path, **options)

    monkeypatch.setattr(runner, "run_logged", run_logged)
    layers.build(
        RecipeTree(RECIPES), "cpu", images=tmp_path / "a", progress=Progress(), space_check=False, bundle=bundle
    )
    devel, base, top = fake.builds
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/debian", devel.build_args["MIRROR"])
    assert devel.build_args["SECURITY_MIRROR"] == devel.build_args["MIRROR"] + "-security"
    assert base.build_args["MIRROR"] == devel.build_args["MIRROR"] and "MIRROR" not in top.build_args
    both = [b"signed\n", b"signed too\n"]
    assert [sorted(answers) for _, answers in seen] == [both, both, []]
    for settings, _ in seen:
        assert "export PIP_NO_INDEX=1\n" in settings and f"PIP_FIND_LINKS={from_bundle.PYTHON_MOUNT}\n" in settings
    assert f"{bundle.resolve() / 'python'}:{from_bundle.PYTHON_MOUNT}:ro" in devel.argv
    assert devel.env["no_proxy"].startswith("127.0.0.1")
    with pytest.raises(OSError):  # the server is gone once the build ends
        urllib.request.urlopen(f"{devel.build_args['MIRROR']}/InRelease", timeout=5)
    # keyed as a bundle's build, not by the server's port: a second build finds them current
    fake.builds.clear()
    layers.build(
        RecipeTree(RECIPES), "cpu", images=tmp_path / "a", progress=Progress(), space_check=False, bundle=bundle
    )
    assert fake.builds == []
