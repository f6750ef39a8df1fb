"""What `apptainer build` writes into a stage's root file system besides its steps' output
(apptainer's internal/pkg/build/metadata.go), written by the build that runs the steps
itself (unpacked.py): /.singularity.d/ with the labels (the image's, those %post appended to
$APPTAINER_LABELS, the build's own, then %labels where no label of that name is there yet),
the definition (an earlier one moved to bootstrap_history/), %environment (appended to the
image's 90-environment.sh), %runscript, %startscript, %test and %help. The build's date
is the fixed SOURCE_DATE_EPOCH, where Apptainer writes the day's (builder.reproducible).

Also the folder's own care: an ordinary user who unpacks an image owns every file, but a
directory without u+w (or a file without u+r) still stops %post and mksquashfs; `opened`
adds those bits and `restored` puts the image's modes back before packing.
"""

import json
import os
import platform
import stat
from pathlib import Path

from ..render import def_reader
from ..reproducible import build_date

META = ".singularity.d"
BUILD_LABELS = "/.build.labels"  # $APPTAINER_LABELS in %post, read back and removed here
ELF_ARCH = {0x3E: "amd64", 0xB7: "arm64", 0x15: "ppc64le"}  # e_machine of the image's /bin/sh
HOST_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "ppc64le": "ppc64le"}  # uname -m


def insert(root: Path, stage, definition: str, apptainer_version: str):
    """/.singularity.d/ of ``root`` as Apptainer leaves it after ``stage``'s %post."""
    meta = root / META
    (meta / "env").mkdir(parents=True, exist_ok=True)
    if stage.script("help"):
        _write(meta / "runscript.help", stage.script("help") + "\n", 0o644)
    _write(meta / "labels.json", json.dumps(_labels(root, stage, apptainer_version), indent="\t"), 0o644)
    _insert_definition(meta, definition)
    environment = stage.script("environment")
    if environment:
        env_file = meta / "env" / "90-environment.sh"
        if env_file.exists():
            with open(env_file, "a") as out:
                out.write("\n" + environment + "\n")
        else:
            _write(env_file, "#!/bin/sh\n\n" + environment + "\n", 0o755)
    for section, name in (("startscript", "startscript"), ("runscript", "runscript"), ("test", "test")):
        if stage.script(section):
            _write(meta / name, _with_shebang(stage.script(section)), 0o755)


def architecture(root: Path) -> str:
    """The image's architecture as SIF names it, from its /bin/sh, as Apptainer reads it; the
    host's for an image without a shell."""
    shell = root / "bin" / "sh"
    if not (shell.exists() or shell.is_symlink()):
        return HOST_ARCH.get(platform.machine(), "amd64")
    target = os.readlink(shell) if shell.is_symlink() else None
    if target is not None:  # /bin/sh -> dash: relative to /bin, or absolute inside the root
        shell = (root / target.lstrip("/")) if target.startswith("/") else shell.parent / target
    with open(shell, "rb") as elf:
        header = elf.read(20)
    return ELF_ARCH.get(int.from_bytes(header[18:20], "little"), "amd64")


def opened(root: Path) -> list:
    """Give the user u+rwx on each directory and u+r on each file that lacks them; the
    (path, mode) pairs changed, for ``restored``."""
    changed = []
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            changed += _add_bits(Path(folder) / name, stat.S_IRWXU)
        for name in files:
            changed += _add_bits(Path(folder) / name, stat.S_IRUSR)
    return changed


def restored(changed: list):
    """The modes ``opened`` changed, back as the image had them (deepest first)."""
    for path, mode in reversed(changed):
        if path.exists() and not path.is_symlink():
            path.chmod(mode)


def _add_bits(path: Path, bits: int) -> list:
    mode = path.lstat().st_mode
    if stat.S_ISLNK(mode) or mode & bits == bits:
        return []
    path.chmod(stat.S_IMODE(mode) | bits)
    return [(path, stat.S_IMODE(mode))]


def _labels(root: Path, stage, apptainer_version: str) -> dict:
    labels_file = root / META / "labels.json"
    labels = json.loads(labels_file.read_text()) if labels_file.exists() else {}
    appended = root / BUILD_LABELS.lstrip("/")
    if appended.exists():
        labels.update(def_reader.label_lines(appended.read_text()))
        appended.unlink()
    labels.update(
        {
            "org.label-schema.schema-version": "1.0",
            "org.label-schema.build-date": build_date(),
            "org.label-schema.usage.apptainer.version": apptainer_version,
            "org.label-schema.build-arch": architecture(root),
        }
    )
    if stage.script("help"):
        labels["org.label-schema.usage"] = f"/{META}/runscript.help"
        labels["org.label-schema.usage.apptainer.runscript.help"] = f"/{META}/runscript.help"
    labels.update({f"org.label-schema.usage.singularity.deffile.{key}": value for key, value in stage.header.items()})
    for name, value in stage.labels().items():
        labels.setdefault(name, value)  # as Apptainer without --force: the image's label stays
    return labels


def _insert_definition(meta: Path, definition: str):
    current = meta / "Singularity"
    if current.exists():
        history = meta / "bootstrap_history"
        history.mkdir(exist_ok=True)
        current.rename(history / f"Apptainer{len(list(history.iterdir()))}")
    _write(current, definition, 0o644)


def _with_shebang(script: str) -> str:
    if script.strip().startswith("#!"):
        shebang, _, rest = script.partition("\n")
        return shebang.strip() + "\n\n" + rest + "\n"
    return "#!/bin/sh\n\n" + script + "\n"


def _write(path: Path, text: str, mode: int):
    path.unlink(missing_ok=True)  # a link in the image must not carry the write elsewhere
    path.write_text(text)
    path.chmod(mode)
