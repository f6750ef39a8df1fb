"""A tiny base image (about 1 MB): Debian's statically linked busybox with its applets as
/bin commands, for the tests of the layer build's mechanics (a failing build, squashfs
flags, signals), which need a layer to build on, not a Python stack. Built on the CPU
image's 1.1 GB base layer, each of those builds unpacked and packed a gigabyte; on this
one they take seconds. The .deb is kept in the user's cache (helpers/debs.py)."""

import subprocess
from pathlib import Path

from helpers import debs

from builder import runner


def build(apptainer, folder: Path) -> Path:
    """folder/tiny.sif: /bin/busybox and a link per applet (sh, echo, sleep, cp, ...)."""
    unpacked, root = folder / "deb", folder / "root"
    runner.run(["dpkg-deb", "-x", str(debs.downloaded("busybox-static")), str(unpacked)])
    # what Apptainer binds into a build (/mnt: the builder's host folder) must exist in a %post
    # run with --writable, as it does in any Debian root
    for inside in ("bin", "etc", "tmp", "mnt", "proc", "sys", "dev", "root", "home", "run", "var/tmp"):
        (root / inside).mkdir(parents=True)
    for name in ("hosts", "resolv.conf"):
        (root / "etc" / name).write_text("")
    busybox = root / "bin" / "busybox"
    busybox.write_bytes((unpacked / "bin" / "busybox").read_bytes())
    busybox.chmod(0o755)
    for applet in runner.run([str(busybox), "--list"]).stdout.split():
        if applet != "busybox":
            (root / "bin" / applet).symlink_to("busybox")
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (root / "etc" / "group").write_text("root:x:0:\n")
    image = folder / "tiny.sif"
    built = subprocess.run([apptainer, "build", str(image), str(root)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    return image
