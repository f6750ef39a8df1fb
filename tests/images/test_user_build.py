"""`make build` as an ordinary user, as on a site's login node (issue 51): a system user with
no sudo, the system-wide Apptainer of helpers/site_login.py, no apt-get and no debootstrap on
its PATH, a fresh clone. The image it builds holds what the root-built one holds, package for
package. A cold build in the user's own cache (about 15 minutes here), so `make test-full`
runs it, not `make test`.

And LUMI as it is (issue 67): a user with user namespaces turned off and no subuid range
builds the site-image target on the stand-in base (the `unpacked` route: the builder's own
steps under proot), and its SBOM lists what the root-built one lists."""

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import run_builder
from helpers import site_login
from helpers.standin import stand_in_recipes

from builder.host import debootstrap_kit, hostinfo

SCRIPT = """set -eu
if command -v apt-get || command -v debootstrap; then echo "apt-get or debootstrap on PATH" >&2; exit 3; fi
[ "$(id -u)" != 0 ]
apptainer --version
git clone -q "$HOME/hpc-ml-containers.git" hpc
cd hpc
make build
.venv/bin/python -m builder doctor | grep '^build route'
"""


def packages(sbom_path) -> set:
    """(type, name, version, purl) of each component: what an image holds."""
    document = json.loads(sbom_path.read_text())
    return {(c["type"], c["name"], c.get("version"), c.get("purl")) for c in document.get("components", [])}


@pytest.mark.full
def test_an_ordinary_user_builds_the_cpu_image_with_the_sites_apptainer_and_no_debootstrap(cpu_image):
    box = site_login.ready()
    home = site_login.user_home()
    try:
        site_login.clone_for(home)
        env = {"HPCML_MIRROR": hostinfo.debian_mirror()}  # no apt sources to read it from on RHEL
        done = site_login.run_as_user(box, home, SCRIPT, env=env, binds=hostinfo.pip_settings()["find_links"])
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-4000:]
        images = home / "hpc" / "images"
        assert (images / "cpu.sif").stat().st_uid == site_login.UID
        devel_log = (images / "cpu.devel.build.log").read_text()
        assert f"{debootstrap_kit.MARKER} {debootstrap_kit.VERSION} from the builder's cache" in devel_log
        assert "/usr/bin/apptainer --fakeroot: user namespace with this user's /etc/subuid range" in done.stdout
        built, reference = packages(images / "cpu.sbom.json"), packages(cpu_image.with_name("cpu.sbom.json"))
        assert built == reference, (sorted(built - reference), sorted(reference - built))
        assert len(built) > 200
    finally:
        shutil.rmtree(home, ignore_errors=True)


UNPRIVILEGED = """set -eu
[ "$(id -u)" != 0 ]
if unshare -U true 2>/dev/null; then echo "user namespaces are on" >&2; exit 3; fi
if grep -q "^$USER:" /etc/subuid /etc/subgid; then echo "$USER has a subuid range" >&2; exit 3; fi
git clone -q "$HOME/hpc-ml-containers.git" hpc
cd hpc
make setup
.venv/bin/python -m builder doctor --recipes "$RECIPES" | grep '^build '
.venv/bin/python -m builder build standin-image --recipes "$RECIPES" --images "$HOME/images"
"""
# Seen at the same path inside the login node (its /tmp is this host's), and the same from
# run to run: the root-built reference's layer key names its base's path
STANDIN = Path("/tmp/hpcml-test-standin")


@pytest.mark.full
def test_a_user_without_user_namespaces_or_a_subuid_range_builds_on_the_sites_image(cpu_image):
    box = site_login.ready()
    shutil.rmtree(STANDIN, ignore_errors=True)
    STANDIN.mkdir(mode=0o755)
    base = STANDIN / "standin.sif"
    os.link(cpu_image.parent / "cpu.devel.sif", base)  # its path, size and time: the key
    recipes = stand_in_recipes(STANDIN, base)
    reference = run_builder("build", "standin-image", "--recipes", recipes, "--images", STANDIN / "root", timeout=3600)
    assert reference.returncode == 0, reference.stderr[-3000:]
    home = site_login.user_home(site_login.LUMI_UID)
    try:
        site_login.clone_for(home, site_login.LUMI_UID)
        done = site_login.run_as_user(
            box,
            home,
            UNPRIVILEGED,
            env={"RECIPES": str(recipes)},
            binds=[STANDIN, *hostinfo.pip_settings()["find_links"]],
            user=site_login.LUMI_USER,
            no_userns=True,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-4000:]
        assert "no privilege: the builder unpacks the site's image into your folder" in done.stdout
        # the site's job for it (CSC's way on LUMI), its memory from the stand-in image's size
        job = next(
            line for line in done.stdout.splitlines() if line.startswith("build job") and "standin-image:" in line
        )
        assert "standin-image: sbatch -p cpu -c 2 --mem=" in job and "APPTAINER_TMPDIR=/tmp" in job, job
        memory = next(
            line for line in done.stdout.splitlines() if line.startswith("build memory") and "standin-" in line
        )
        assert "GB, the build's temporary folders in /tmp (node memory): twice the uncompressed" in memory
        assert "without privilege (the builder runs the steps)" in done.stderr and "its %test passed" in done.stderr
        image = home / "images" / "standin-image.sif"
        assert image.stat().st_uid == site_login.LUMI_UID
        log = (home / "images" / "standin-image.image.build.log").read_text()
        assert "--- unprivileged: unpacking" in log and "--- test: runtime" in log
        built, root_built = (
            packages(image.with_name("standin-image.sbom.json")),
            packages(STANDIN / "root" / "standin-image.sbom.json"),
        )
        assert built == root_built, (sorted(built - root_built), sorted(root_built - built))
        assert len(built) > 200
    finally:
        shutil.rmtree(home, ignore_errors=True)
