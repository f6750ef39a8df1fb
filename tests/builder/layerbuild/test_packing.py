"""builder/layerbuild/packing.py: what every route's last step puts in place of the build's
facts (unit), and two packings of trees written apart, at other times, one sha256 (real
mksquashfs and `apptainer sif`; `verify --rebuild` on them is in tests/builder/sbom)."""

import hashlib
import json
import os
import shutil
import subprocess
import time

from builder import reproducible
from builder.layerbuild import packing

MIRROR = "http://mirror.example/debian"
TEMPLATE = "Bootstrap: debootstrap\nMirrorURL: {{ MIRROR }}\nOSVersion: bookworm\n"


def _root(root, *, day):
    """A tiny root as Apptainer leaves it: its date in the labels, the substituted definition,
    mount points in /dev, files written ``day`` seconds after the epoch."""
    (root / "bin").mkdir(parents=True)
    shutil.copy("/bin/dash", root / "bin" / "sh")
    (root / "etc").mkdir()
    (root / "etc" / "motd").write_text("hello\n")
    meta = root / ".singularity.d"
    (meta / "env").mkdir(parents=True)
    (meta / "Singularity").write_text(TEMPLATE.replace("{{ MIRROR }}", MIRROR))
    labels = {
        "org.label-schema.build-date": "Monday_7_December_2026_2:16:5_UTC",
        "org.label-schema.usage.singularity.deffile.mirrorurl": MIRROR,
        "org.label-schema.schema-version": "1.0",
    }
    (meta / "labels.json").write_text(json.dumps(labels))
    (root / "dev" / "pts").mkdir(parents=True)
    (root / "dev" / "null").write_text("")
    (root / "dev" / "fd").symlink_to("/proc/self/fd")
    later = reproducible.SOURCE_DATE_EPOCH + day
    for folder, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            os.utime(os.path.join(folder, name), (later, later), follow_symlinks=False)
    os.utime(root / "etc" / "motd", (1000, 1000))  # older than the epoch: kept
    return root


def test_neutral_puts_fixed_values_where_the_build_wrote_its_own(tmp_path):
    root = _root(tmp_path / "root", day=86400 * 300)
    packing.neutral(root, TEMPLATE, {"MIRROR": MIRROR, "DEVEL": ""})
    assert (root / ".singularity.d" / "Singularity").read_text() == TEMPLATE
    labels = json.loads((root / ".singularity.d" / "labels.json").read_text())
    assert labels["org.label-schema.build-date"] == "Thursday_1_January_2026_0:0:0_UTC"
    assert labels["org.label-schema.usage.singularity.deffile.mirrorurl"] == "{{ MIRROR }}"
    assert list(labels) == sorted(labels)
    assert list((root / "dev").iterdir()) == [] and oct((root / "dev").stat().st_mode & 0o7777) == "0o755"
    times = {os.lstat(os.path.join(f, n)).st_mtime for f, d, fs in os.walk(root) for n in (*d, *fs)}
    assert max(times) == reproducible.SOURCE_DATE_EPOCH
    assert (root / "etc" / "motd").stat().st_mtime == 1000


def test_two_trees_written_apart_pack_into_one_file(apptainer, tmp_path):
    made = []
    for name, day, umask in (("one", 3600, 0o022), ("two", 86400 * 40, 0o077)):
        old = os.umask(umask)
        try:
            root = _root(tmp_path / name / "root", day=day)
        finally:
            os.umask(old)
        for path in (root / "etc" / "motd", root / "bin" / "sh"):
            path.chmod(0o644 if path.name == "motd" else 0o755)  # the image's modes, not the umask's
        for folder in (root, root / "bin", root / "etc", root / ".singularity.d", root / ".singularity.d" / "env"):
            folder.chmod(0o755)
        (root / ".singularity.d" / "labels.json").chmod(0o644)
        host = {"MIRROR": MIRROR}
        how = packing.Packing(
            apptainer, definition=TEMPLATE, host_values=host, compressed=True, log=tmp_path / name / "log"
        )
        out = tmp_path / name / "image.sif"
        packing.pack(how, root, out, tmp_path / name)
        assert not root.exists()  # removed once packed
        made.append(out)
        time.sleep(1.1)  # another second for anything that would write the day's time
    one, two = (hashlib.sha256(image.read_bytes()).hexdigest() for image in made)
    assert one == two
    listed = subprocess.run([apptainer, "sif", "list", str(made[0])], capture_output=True, text=True, timeout=60)
    assert [line.split("|")[-1].strip() for line in listed.stdout.splitlines()[3:]] == [
        "Def.FILE",
        "JSON.Generic",
        "FS (Squashfs/*System/amd64)",
    ]
    dumped = subprocess.run([apptainer, "sif", "dump", "1", str(made[0])], capture_output=True, text=True, timeout=60)
    assert dumped.stdout == TEMPLATE
    metadata = subprocess.run([apptainer, "sif", "dump", "2", str(made[0])], capture_output=True, text=True, timeout=60)
    attributes = json.loads(metadata.stdout)["data"]["attributes"]
    assert attributes["labels"]["org.label-schema.build-date"] == reproducible.build_date()
    assert MIRROR not in metadata.stdout


def test_a_users_folder_with_the_images_owners_packs_into_roots_bytes(apptainer, tmp_path):
    """An ordinary user's unpacked folder holds every file as the user's; the pseudo file of
    the image's owners (a group, a link's owner, names with quotes) gives root's bytes back."""
    made = []
    for name, uid in (("root", 0), ("user", 4242)):
        root = _root(tmp_path / name / "root", day=60)
        (root / "var" / "local").mkdir(parents=True)
        (root / "etc" / 'a "quoted" name').write_text("q\n")
        (root / "bin" / "vi").symlink_to("sh")
        for path in (root, *root.rglob("*")):
            os.lchown(path, uid, uid)
        if uid == 0:  # the image's own owners, as root's unsquashfs keeps them
            os.chown(root / "var" / "local", 0, 50)
            os.lchown(root / "bin" / "vi", 0, 7)
        listing = {"/var/local": (0o2775, 0, 50), "/bin/vi": (0o777, 0, 7)}
        how = packing.Packing(apptainer, TEMPLATE, {}, True, tmp_path / name / "log")
        out = tmp_path / name / "image.sif"
        packing.pack(how, root, out, tmp_path / name, listing if uid else None)
        made.append(out)
    assert made[0].read_bytes() == made[1].read_bytes()
    lines = subprocess.run(["unsquashfs", "-lln", "-o", str(packing.sif.root_partition(apptainer, made[1]).offset),
                            str(made[1])], capture_output=True, text=True, timeout=60).stdout  # fmt: skip
    assert " 0/50 " in next(line for line in lines.splitlines() if line.endswith("/var/local"))
    assert "4242" not in lines
