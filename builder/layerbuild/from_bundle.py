"""A build from a source bundle (builder/bundle): nothing asked of the network, every file
taken from the bundle, after the bundle is read back and matched to the locks.

The layers' Debian mirror is the bundle's debian/ folder, served on loopback while the
layers build: debootstrap on the host and apt in %post both reach it, and check Debian's
signature as they would online. pip's only source is the bundle's python/ folder, bound
read-only into the build (no index at all). The layer keys name the bundle, not the server's
port, so a second build from a bundle finds its layers current. A host with no Apptainer
makes its toolbox from the bundle's copy too (bundle/toolbox_part.py).

Example:
    bundle = opened(tree, "cpu", "bundles/cpu")     # None without --bundle
    with build_args(bundle, {"MIRROR": "https://..."}) as args:  # MIRROR: http://127.0.0.1:PORT/debian
        ...
"""

import contextlib
import platform
from dataclasses import dataclass
from pathlib import Path

from ..bundle import make, python_part, serve, toolbox_part
from ..errors import ToolError
from ..host import toolbox, which_apptainer
from ..render.parts import HOST_MOUNT
from ..render.plan import MIRROR_ARG, SECURITY_MIRROR_ARG

KEY_MIRROR = "bundle"  # the mirrors layer keys take in a build from a bundle
# {build argument: the bundle's folder that is that mirror}
MIRROR_ARCHIVES = {MIRROR_ARG: "debian", SECURITY_MIRROR_ARG: "debian-security"}
PYTHON_DIR = "bundle-python"  # where the bundle's python/ is bound, under the host mount
PYTHON_MOUNT = f"{HOST_MOUNT}/{PYTHON_DIR}"
PROXIES = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY")


@dataclass(frozen=True)
class Bundle:
    folder: Path
    files: dict  # {path in the bundle: sha256}, each read back

    @property
    def python(self) -> Path:
        return self.folder / python_part.FOLDER


def opened(tree, name, folder):
    """The checked bundle at ``folder`` for target ``name``, or None when no folder is given."""
    if folder is None:
        return None
    return Bundle(Path(folder).resolve(), make.checked(tree, name, Path(folder)))


def key_args(bundle, host_args: dict) -> dict:
    """The host's build arguments as the layer keys see them."""
    if bundle is None:
        return host_args
    return {**host_args, **{arg: KEY_MIRROR for arg in MIRROR_ARCHIVES if arg in host_args}}


@contextlib.contextmanager
def build_args(bundle, host_args: dict):
    """The host's build arguments for the layers, the bundle's server as the mirrors while it
    runs: its debian/ and debian-security/ folders, each a mirror of its archive."""
    if bundle is None or not MIRROR_ARCHIVES.keys() & host_args.keys():
        yield host_args
        return
    with serve.serving(bundle.folder, bundle.files, root=bundle.folder) as url:
        yield {**host_args, **{arg: f"{url}/{top}" for arg, top in MIRROR_ARCHIVES.items() if arg in host_args}}


def find_apptainer(bundle, host_args: dict, site, progress, log_dir):
    """(path, label) of the Apptainer the build runs: the host's, or the toolbox, made from the
    bundle's copy (served as its debian/ mirror) in a build from a bundle that holds one. A
    bundle with none is refused in one line where the host has neither Apptainer nor a toolbox."""
    mirror = None
    if bundle is not None and toolbox_part.holds(bundle.files):
        mirror = host_args[MIRROR_ARG]
    elif bundle is not None and not (which_apptainer.installed_apptainer(site) or toolbox.is_ready()):
        raise ToolError(
            f"{bundle.folder}: holds no Apptainer toolbox for {platform.machine()}, and this host has no "
            "Apptainer; install Apptainer, or make the bundle again with this builder on such a host"
        )
    return which_apptainer.find_apptainer(site, progress, log_dir, mirror)


def settings_lines() -> list:
    """What the host settings file says in a build from a bundle: pip reads only the bundle."""
    return [
        "unset PIP_INDEX_URL PIP_EXTRA_INDEX_URL " + " ".join(PROXIES),
        "export PIP_NO_INDEX=1",
        f"export PIP_FIND_LINKS={PYTHON_MOUNT}",
    ]


def environment() -> dict:
    """For Apptainer and the debootstrap it runs: the loopback server without a proxy."""
    return {"no_proxy": "127.0.0.1,localhost", "NO_PROXY": "127.0.0.1,localhost"}
