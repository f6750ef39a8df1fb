"""A site's login node on this machine, for building as an ordinary user (issue 51).

A Debian trixie root with Apptainer installed system-wide from its distribution's package
(as sites install it from their distribution's), Python, make, git and uidmap, and neither
apt-get nor debootstrap. A system user made in it, with a /etc/subuid range, runs commands
there through a mount namespace (the toolbox's enter script, as root) and setpriv. The
site's CA bundle and pip configuration are this host's, as a site behind the same proxy
would set them. Kept in the cache, made once in about three minutes."""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from conftest import run_builder

from builder.host import cache, hostinfo

USER, UID = "hpcuser", 4242
SUBIDS = f"{USER}:300000:65536\n"  # above the toolbox's root:100000:65536
PACKAGES = "python3-venv make git uidmap wget perl binutils ca-certificates"
STAMP = "SITE-READY"
USER_PATH = "/usr/local/bin:/usr/bin:/bin"  # a login shell's, without the sbin folders


def home() -> Path:
    return cache.cache_dir() / "test-site-login" / "hpc-ml-containers" / "toolbox"


def ready() -> Path:
    """The login node's folder (its root in root/, its enter script in bin/), made when missing."""
    box = home()
    if (box / STAMP).is_file():
        return box
    made = run_builder("toolbox", "provision", env={"XDG_CACHE_HOME": str(box.parent.parent)}, timeout=1800)
    assert made.returncode == 0, made.stderr[-3000:]
    root = box / "root"
    _in_root(box, "/usr/bin/apt-get", "update")
    _in_root(box, "/bin/sh", "-c", f"DEBIAN_FRONTEND=noninteractive apt-get install -y {PACKAGES} && apt-get clean")
    _in_root(box, "/usr/bin/dpkg", "--purge", "debootstrap")
    _in_root(box, "/usr/sbin/useradd", "--create-home", "--uid", str(UID), "--shell", "/bin/bash", USER)
    for name in ("subuid", "subgid"):
        with open(root / "etc" / name, "a") as ids:
            ids.write(SUBIDS)
    for tool in ("apt-get", "apt"):  # a RHEL or SLES login node has no apt
        (root / "usr" / "bin" / tool).unlink(missing_ok=True)
    shutil.copyfile("/etc/ssl/certs/ca-certificates.crt", root / "etc/ssl/certs/ca-certificates.crt")
    (root / "etc" / "pip.conf").write_text(_pip_conf())
    (box / STAMP).write_text("trixie, apptainer, no apt-get or debootstrap\n")
    return box


def user_home() -> Path:
    """A fresh home for the user, under /tmp (seen inside the login node), owned by it."""
    folder = Path(tempfile.mkdtemp(prefix="hpcml-user-", dir="/tmp"))
    folder.chmod(0o755)
    os.chown(folder, UID, UID)
    return folder


def run_as_user(box: Path, home: Path, script: str, env=None, binds=(), timeout=3600):
    """``script`` in bash as the user on the login node, with a login shell's PATH and
    HOME=``home``, nothing else of this process's environment but ``env``."""
    settings = [f"HOME={home}", f"USER={USER}", f"PATH={USER_PATH}", "LANG=C.UTF-8"]
    settings += [f"{key}={value}" for key, value in (env or {}).items()]
    argv = [str(box / "bin" / "enter"), "/usr/bin/setpriv", f"--reuid={UID}", f"--regid={UID}", "--init-groups"]
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
