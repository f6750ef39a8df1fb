"""A site's login node on this machine, for building as an ordinary user (issue 51).

A Debian trixie root with Apptainer installed system-wide from its distribution's package
(as sites install it from their distribution's), Python, make, git, uidmap and proot 5.4
(Debian forky's: trixie's 5.1 does not translate statx; as LUMI's `module load LUMI systools`
puts one on PATH), and neither apt-get nor debootstrap.
Two system users made in it run commands there through a mount namespace (the toolbox's
enter script, as root) and setpriv: `hpcuser` with a /etc/subuid range, `lumiuser` with
none; either can be run with user namespaces turned off (no_userns.py), as on LUMI. The
site's CA bundle and pip configuration are this host's, as a site behind the same proxy
would set them. Kept in the cache, made once in about three minutes."""

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from conftest import ROOT, run_builder

from builder.host import cache, hostinfo, http_get

USER, UID = "hpcuser", 4242
LUMI_USER, LUMI_UID = "lumiuser", 4343  # no /etc/subuid range
SUBIDS = f"{USER}:300000:65536\n"  # above the toolbox's root:100000:65536
# squashfuse: how an unprivileged Apptainer mounts a squashfs (a project env); Apptainer's own
# packages carry it, Debian's does not
PACKAGES = "python3-venv make git uidmap wget perl binutils ca-certificates libtalloc2 squashfuse fuse3"
PROOT_DEB = "pool/main/p/proot/proot_5.4.0-3_amd64.deb"  # forky's, on the host's Debian mirror
PROOT_SHA256 = "bebc55a4461cb6cf3063f8248aa2c93f12e2426d054cc85e42271b349d2f514f"
STAMP = "SITE-READY"
STAMP_TEXT = "trixie, apptainer, squashfuse, proot 5.4, two users (one without subids), no apt-get or debootstrap\n"
USER_PATH = "/usr/local/bin:/usr/bin:/bin"  # a login shell's, without the sbin folders
OFFLINE = 'ip link set lo up && hostname offline-login && exec "$@"'


def home() -> Path:
    return cache.cache_dir() / "test-site-login" / "hpc-ml-containers" / "toolbox"


def ready() -> Path:
    """The login node's folder (its root in root/, its enter script in bin/), made when missing."""
    box = home()
    # FUSE for every user, as each distribution's udev rules leave it (this machine's is root's)
    if Path("/dev/fuse").exists():
        os.chmod("/dev/fuse", 0o666)
    if (box / STAMP).is_file() and (box / STAMP).read_text() == STAMP_TEXT:
        return box
    shutil.rmtree(box, ignore_errors=True)  # an older login node: made again, whole
    made = run_builder("toolbox", "provision", env={"XDG_CACHE_HOME": str(box.parent.parent)}, timeout=1800)
    assert made.returncode == 0, made.stderr[-3000:]
    root = box / "root"
    _in_root(box, "/usr/bin/apt-get", "update")
    _in_root(box, "/bin/sh", "-c", f"DEBIAN_FRONTEND=noninteractive apt-get install -y {PACKAGES} && apt-get clean")
    _in_root(box, "/usr/bin/dpkg", "--purge", "debootstrap")
    with http_get.open_url(f"{hostinfo.debian_mirror()}/{PROOT_DEB}", timeout=120) as answer:
        deb = answer.read()
    assert hashlib.sha256(deb).hexdigest() == PROOT_SHA256, PROOT_DEB
    with tempfile.TemporaryDirectory(dir="/tmp") as folder:  # the login node sees the host's /tmp
        (Path(folder) / "proot.deb").write_bytes(deb)
        _in_root(box, "/usr/bin/dpkg", "-i", f"{folder}/proot.deb")
    for name, uid in ((USER, UID), (LUMI_USER, LUMI_UID)):
        _in_root(box, "/usr/sbin/useradd", "--create-home", "--uid", str(uid), "--shell", "/bin/bash", name)
    for name in ("subuid", "subgid"):  # useradd gives each user a range: lumiuser keeps none
        ids = root / "etc" / name
        kept = [line for line in ids.read_text().splitlines(keepends=True) if not line.startswith(f"{LUMI_USER}:")]
        ids.write_text("".join(kept) + SUBIDS)
    for tool in ("apt-get", "apt"):  # a RHEL or SLES login node has no apt
        (root / "usr" / "bin" / tool).unlink(missing_ok=True)
    shutil.copyfile("/etc/ssl/certs/ca-certificates.crt", root / "etc/ssl/certs/ca-certificates.crt")
    (root / "etc" / "pip.conf").write_text(_pip_conf())
    (box / STAMP).write_text(STAMP_TEXT)
    return box


def user_home(uid=UID) -> Path:
    """A fresh home for the user, under /tmp (seen inside the login node), owned by it."""
    folder = Path(tempfile.mkdtemp(prefix="hpcml-user-", dir="/tmp"))
    folder.chmod(0o755)
    os.chown(folder, uid, uid)
    return folder


def clone_for(home: Path, uid=UID) -> Path:
    """A bare clone of this repository's committed tree in ``home``, owned by the user, as a
    user would fetch it (the user's script clones it again to build)."""
    repo = home / "hpc-ml-containers.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(ROOT), str(repo)], check=True, timeout=300)
    subprocess.run(["chown", "-R", f"{uid}:{uid}", str(repo)], check=True)
    return repo


def run_as_user(
    box: Path, home: Path, script: str, env=None, binds=(), timeout=3600, user=USER, no_userns=False, offline=False
):
    """``script`` in bash as ``user`` on the login node, with a login shell's PATH and
    HOME=``home``, nothing else of this process's environment but ``env``; no_userns: with
    user namespaces turned off for it (helpers/no_userns.py), as LUMI has them; offline: in a
    network namespace with loopback alone, under another hostname, as a site's build host
    with no network."""
    uid = {USER: UID, LUMI_USER: LUMI_UID}[user]
    settings = [f"HOME={home}", f"USER={user}", f"PATH={USER_PATH}", "LANG=C.UTF-8"]
    settings += [f"{key}={value}" for key, value in (env or {}).items()]
    argv = ["unshare", "--net", "--uts", "sh", "-c", OFFLINE, "sh"] if offline else []
    argv += [str(box / "bin" / "enter")]
    if no_userns:
        argv += ["/usr/bin/python3", "-c", (Path(__file__).parent / "no_userns.py").read_text()]
    argv += ["/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}", "--init-groups"]
    argv += ["/usr/bin/env", "-i", *settings, "/bin/bash", "-c", script]
    host_env = dict(os.environ, HPCML_TOOLBOX_BINDS=":".join(map(str, [home, *binds])))
    return subprocess.run(argv, capture_output=True, text=True, env=host_env, cwd=home, timeout=timeout)


def _in_root(box, *argv):
    done = subprocess.run([str(box / "bin" / "enter"), *argv], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{argv}: {done.stdout[-2000:]}{done.stderr[-2000:]}"


def _pip_conf() -> str:
    """The host's pip settings that reach the indexes: its CA bundle and local wheels."""
    settings = hostinfo.pip_settings()
    lines = ["[global]", "cert = /etc/ssl/certs/ca-certificates.crt"]
    if settings["index_url"]:
        lines.append(f"index-url = {settings['index_url']}")
    if settings["find_links"]:
        lines.append(f"find-links = {' '.join(settings['find_links'])}")
    return "\n".join(lines) + "\n"
