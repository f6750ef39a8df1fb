"""Every build route's last step: the layer's root file system packed into its SIF one way,
so that two builds of one commit give one sha256 whatever machine, user, route or cache made
them (docs/reproducibility.md).

Apptainer's own SIF (or the unpacked route's folder) holds what is about the build, not the
image; `neutral` puts fixed values in its place:

  - /.singularity.d/Singularity: the layer's definition as committed (containers/*.def),
    build arguments not filled in: their values are this host's (its mirror, a work folder);
  - labels.json: the build date is SOURCE_DATE_EPOCH's (Apptainer 1.4 writes the day's), and a
    label holding a host-supplied argument's value (the base's MirrorURL) holds `{{ NAME }}`;
  - /dev/: empty. Apptainer mounts its own /dev whenever the image runs; a root build leaves
    mount points there, a --fakeroot build does not;
  - no time after SOURCE_DATE_EPOCH; a path this step wrote has that time.

Then mksquashfs with fixed options (no xattrs, one compression, reproducible order whatever
the CPU count), a SIF of definition, inspect metadata and root partition, and its header and
descriptors stamped (host/sif_header.py). An ordinary user's unpacked folder holds every file
as the user's: a pseudo file gives every path its owner in the image it came from (root's for
what the build made), which packs the same bytes as root's folder, with no proot (its
mksquashfs crashes under some proot: Apptainer issue #3560).

    repack(Packing(apptainer, definition=plan.text, ...), Path("built.sif"), Path("out.sif"), work)
"""

import json
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from .. import contract, fileio, reproducible, runner
from ..errors import ToolError
from ..host import sif, sif_header
from ..render.plan import PARENT_ARGS
from . import sandbox_files

VERSION = 1  # in each layer's key (store.build_key): an image packed another way is another file
COMPRESSED = ("-comp", "gzip")
UNCOMPRESSED = ("-noI", "-noD", "-noF", "-noX")  # a layer only the next layer reads
FIXED = ("-noappend", "-no-xattrs", "-no-progress", "-quiet")
SIF_ARCH = {"386": 1, "amd64": 2, "arm": 3, "arm64": 4, "ppc64le": 6, "s390x": 11}  # --partarch
TIMEOUT_S = 4 * 3600
META = sandbox_files.META


@dataclass(frozen=True)
class Packing:
    """How a layer is packed: its definition as committed, the values of the build arguments
    the host supplied ({"MIRROR": "http://..."}), compressed or not, the build's log."""

    apptainer: str
    definition: str
    host_values: dict
    compressed: bool
    log: Path
    env: dict = field(default_factory=dict)  # what Apptainer needs besides (the toolbox's binds)


def for_layer(job, args: dict, compressed: bool, folders: tuple) -> Packing:
    """How layers.LayerBuild ``job`` built with ``args`` is packed: its definition as
    committed, the values the host gave its arguments (not the parents' file names, which
    are the same everywhere), the folders the toolbox's Apptainer must see."""
    host_values = {arg: value for arg, value in args.items() if arg not in PARENT_ARGS}
    binds = {contract.TOOLBOX_BINDS: ":".join(map(str, folders))}
    return Packing(job.apptainer, job.plan.text, host_values, compressed, job.log, env=binds)


def repack(packing: Packing, built: Path, out: Path, work: Path):
    """``built`` (a SIF Apptainer wrote) unpacked under ``work`` and packed into ``out``."""
    partition = sif.root_partition(packing.apptainer, built)
    root = work / "packing"
    sif.unpack(partition, root, packing.log)
    listing = None if os.geteuid() == 0 else sif.listing(partition)
    built.unlink()  # its space is needed for the new one
    pack(packing, root, out, work, listing)


def pack(packing: Packing, root: Path, out: Path, work: Path, listing: dict = None, opened=()):
    """``root`` packed into the SIF ``out``. ``listing``: the owners a user's folder lost
    (host.sif.listing of the image it was unpacked from; None: root's folder holds them);
    ``opened``: the modes sandbox_files.opened changed, put back first."""
    neutral(root, packing.definition, packing.host_values)
    inspect = [packing.apptainer, "inspect", "--all", str(root)]
    inspected = runner.run(inspect, env=dict(os.environ, **packing.env), timeout=300).stdout
    sandbox_files.restored(opened)
    arch = sandbox_files.architecture(root)
    squashfs = work / "root.squashfs"
    argv = [root, squashfs, *FIXED, *(COMPRESSED if packing.compressed else UNCOMPRESSED)]
    env = dict(os.environ, **packing.env, MALLOC_MMAP_MAX_="0", MALLOC_ARENA_MAX="1000000")  # as Apptainer's
    env["SOURCE_DATE_EPOCH"] = str(reproducible.SOURCE_DATE_EPOCH)
    if listing is not None:
        (work / "owners.pseudo").write_text(owners(root, listing))
        argv += ["-pf", work / "owners.pseudo", "-root-uid", "0", "-root-gid", "0"]
    runner.run_logged(
        ["mksquashfs", *map(str, argv)], packing.log, env=env, what="mksquashfs of the image", timeout=TIMEOUT_S
    )
    fileio.remove_tree(root)  # its space, before the SIF takes as much again
    _assemble(packing, squashfs, inspected, arch, work, out)


def neutral(root: Path, definition: str, host_values: dict):
    """Fixed values in ``root`` where Apptainer wrote facts of the build (module docstring)."""
    meta = root / META
    meta.mkdir(parents=True, exist_ok=True)
    written = [meta, meta / "Singularity", meta / "labels.json", root / "dev"]
    _write(meta / "Singularity", definition, 0o644)
    labels_file = meta / "labels.json"
    labels = json.loads(labels_file.read_text()) if labels_file.exists() else {}
    labels = {name: _placeholders(str(value), host_values) for name, value in labels.items()}
    labels["org.label-schema.build-date"] = reproducible.build_date()
    _write(labels_file, json.dumps(dict(sorted(labels.items())), indent="\t"), 0o644)
    dev = root / "dev"
    if dev.is_symlink() or dev.is_file():
        dev.unlink()
    shutil.rmtree(dev, ignore_errors=True)
    dev.mkdir()
    dev.chmod(0o755)  # whatever the umask
    _clamp_times(root, written)


def owners(root: Path, listing: dict) -> str:
    """mksquashfs pseudo lines giving every path under ``root`` its mode as it is now and its
    owner in the image it was unpacked from (host.sif.listing; root for what the build made)."""
    lines = []
    for folder, dirs, files in os.walk(root):
        for name in sorted((*dirs, *files)):
            path = os.path.join(folder, name)
            relative = os.path.relpath(path, root)
            if "\n" in relative:
                raise ToolError(f"{path!r}: a line break in a path, which mksquashfs's pseudo file cannot name")
            _, uid, gid = listing.get("/" + relative, (0, 0, 0))
            quoted = relative.replace("\\", "\\\\").replace('"', '\\"')
            lines.append(f'"{quoted}" m {stat.S_IMODE(os.lstat(path).st_mode):o} {uid} {gid}\n')
    return "".join(lines)


def _placeholders(value: str, host_values: dict) -> str:
    for name, host_value in sorted(host_values.items()):
        if host_value:
            value = value.replace(host_value, "{{ " + name + " }}")
    return value


def _clamp_times(root: Path, written: list):
    """No path newer than SOURCE_DATE_EPOCH (a folder %post wrote in, a file of the build),
    and each path this step wrote at it."""
    epoch = reproducible.SOURCE_DATE_EPOCH
    for path in (root, *written):
        os.utime(path, (epoch, epoch), follow_symlinks=False)
    for folder, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            path = os.path.join(folder, name)
            if os.lstat(path).st_mtime > epoch:
                os.utime(path, (epoch, epoch), follow_symlinks=False)


def _assemble(packing: Packing, squashfs: Path, inspected: str, arch: str, work: Path, out: Path):
    """The SIF: definition, inspect metadata, root partition, in Apptainer's order and group,
    then its header and descriptors stamped."""
    definition, metadata = work / "Singularity", work / "inspect-metadata.json"
    definition.write_text(packing.definition)
    metadata.write_text(json.dumps(json.loads(inspected), separators=(",", ":")))
    out.unlink(missing_ok=True)
    apptainer = packing.apptainer
    runner.run([apptainer, "sif", "new", str(out)], timeout=60)
    add = [apptainer, "sif", "add", "--groupid", "1"]
    runner.run([*add, "--datatype", "1", str(out), str(definition)], timeout=60)
    runner.run([*add, "--datatype", "6", "--filename", metadata.name, str(out), str(metadata)], timeout=60)
    partition = ["--datatype", "4", "--parttype", "2", "--partfs", "1", "--partarch", str(SIF_ARCH[arch])]
    runner.run([*add, *partition, str(out), str(squashfs)], timeout=600)
    squashfs.unlink()
    sif_header.stamp(out, reproducible.SOURCE_DATE_EPOCH)


def _write(path: Path, text: str, mode: int):
    path.unlink(missing_ok=True)  # a link in the image must not carry the write elsewhere
    path.write_text(text)
    path.chmod(mode)
