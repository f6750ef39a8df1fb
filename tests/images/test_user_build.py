"""`make build` as an ordinary user, as on a site's login node (issue 51): a system user with
no sudo, the system-wide Apptainer of helpers/site_login.py, no apt-get and no debootstrap on
its PATH, a fresh clone. The image it builds holds what the root-built one holds, package for
package. A cold build in the user's own cache (about 15 minutes here), so `make test-full`
runs it, not `make test`."""

import json
import shutil
import subprocess

import pytest
from conftest import ROOT
from helpers import site_login

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
        repo = home / "hpc-ml-containers.git"
        subprocess.run(["git", "clone", "-q", "--bare", str(ROOT), str(repo)], check=True, timeout=300)
        subprocess.run(["chown", "-R", f"{site_login.UID}:{site_login.UID}", str(repo)], check=True)
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
