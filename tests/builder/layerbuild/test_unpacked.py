"""layerbuild.unpacked without proot, unsquashfs or Apptainer (a fake for each, the copies
real): the order of a two-stage build from an image, what %post and %test run under (binds,
a clean environment, the statx setting), the SIF's three objects, and one line for a stage
that does not start from an image or a %files path that leads out of it. The real build, as
an ordinary user with no user namespaces, is tests/images/test_user_build.py (full)."""

import json
import subprocess
from pathlib import Path

import pytest

from builder import reproducible, runner
from builder.errors import ToolError
from builder.layerbuild import packing, unpacked

TEMPLATE = "Bootstrap: localimage\nFrom: {{ BASE }}\n"  # the definition as committed: packed in place of the built one
DEFINITION = """Bootstrap: localimage
From: base.sif
Stage: build

%files
{wheel} /opt/w.whl

%post
echo built > /opt/venv/made

Bootstrap: localimage
From: base.sif
Stage: final

%files from build
/opt/venv /opt/venv.new

%test
true

%labels
org.example.target demo
"""
LISTING = "1 |1 |NONE |32176-32757 |Def.FILE\n3 |1 |NONE |4096-8192 |FS (Squashfs/*System/amd64)\n"
OWNERS = (
    "drwxr-xr-x 0/0 3 2026-01-01 00:00 squashfs-root/opt\ndrwxrwsr-x 0/50 3 2026-01-01 00:00 squashfs-root/opt/venv\n"
)


class Fakes:
    def __init__(self, monkeypatch):
        self.commands, self.packed, self.stamped = [], {}, []
        monkeypatch.setattr(runner, "run", self.run)
        monkeypatch.setattr(runner, "run_logged", self.run_logged)
        monkeypatch.setattr(packing.sif_header, "stamp", lambda image, when: self.stamped.append((image, when)))

    def run(self, argv, **kwargs):
        self.commands.append(list(map(str, argv)))
        asked = argv[2] if argv[1] == "sif" else argv[1] if argv[0] == "apptainer" else argv[0]
        answers = {"list": LISTING, "inspect": json.dumps({"data": {"attributes": {}}}), "unsquashfs": OWNERS}
        answer = answers.get(asked, "")
        return subprocess.CompletedProcess(argv, 0, answer, "")

    def run_logged(self, argv, log, env=None, **kwargs):
        argv = list(map(str, argv))
        self.commands.append([*argv])
        if argv[0] == "unsquashfs" and "-d" in argv:  # an image: a shell, a venv
            root = Path(argv[argv.index("-d") + 1])
            (root / "bin").mkdir(parents=True)
            (root / "bin" / "sh").write_bytes(b"\x7fELF" + bytes(14) + b"\x3e\x00" + bytes(44))
            (root / "opt" / "venv").mkdir(parents=True)
        elif argv[0] == "cp":
            subprocess.run(argv, check=True)
        elif argv[0] == "mksquashfs":  # what it packs: the folder as packing.py left it
            root = Path(argv[1])
            files = (p for p in root.rglob("*") if p.is_file() and p.name != "sh")
            self.packed = {p.relative_to(root).as_posix(): p.read_text() for p in files}
            Path(argv[2]).write_bytes(b"hsqs")
        elif argv[0].endswith("proot"):
            self.commands[-1].append(f"env:{(env or {}).get('PROOT_NO_SECCOMP')}")
            if argv[-1].endswith("/.post.script"):  # what %post would do, in the stage's root
                root = Path(argv[argv.index("-r") + 1])
                (root / "opt" / "venv" / "made").write_text("built\n")


def steps(tmp_path):
    return unpacked.Steps(
        apptainer="apptainer", proot="/opt/proot", log=tmp_path / "log", images=tmp_path,
        binds=(("/srv/host", "/mnt"),), proot_env={"PROOT_NO_SECCOMP": "1"}, apptainer_version="1.4.5",
        packing=packing.Packing("apptainer", TEMPLATE, {}, True, tmp_path / "log"),
    )  # fmt: skip


def test_two_stages_from_an_image_then_a_sif_of_three_objects(tmp_path, monkeypatch):
    fakes = Fakes(monkeypatch)
    wheel = tmp_path / "r.whl"
    wheel.write_text("wheel")
    unpacked.build(steps(tmp_path), DEFINITION.format(wheel=wheel), tmp_path / "work", tmp_path / "out.sif")
    programs = [c[0] if c[0] != "apptainer" else " ".join(c[:3]) for c in fakes.commands]
    assert programs == [
        "apptainer sif list", "unsquashfs", "cp", "/opt/proot",  # build: image, %files, %post
        "apptainer sif list", "unsquashfs", "cp", "/opt/proot",  # final: image, %files from build, %test
        "unsquashfs", "apptainer inspect --all", "mksquashfs",  # the base's owners, metadata, packing
        "apptainer sif new", "apptainer sif add", "apptainer sif add", "apptainer sif add",
    ]  # fmt: skip
    post, test = (c for c in fakes.commands if c[0] == "/opt/proot")
    (pack,) = (c for c in fakes.commands if c[0] == "mksquashfs")  # no proot: the owners in a pseudo file
    assert "-all-root" not in pack and pack[-4:] == ["-root-uid", "0", "-root-gid", "0"]
    pseudo = Path(pack[pack.index("-pf") + 1]).read_text().splitlines()  # every path, its owner in the base
    assert '"opt/venv" m 755 0 50' in pseudo and '"opt/venv.new/made" m 644 0 0' in pseudo
    assert post[:3] == ["/opt/proot", "-0", "--kill-on-exit"] and "/srv/host:/mnt" in post
    assert post[-1] == "env:1" and "APPTAINER_LABELS=/.build.labels" in post
    assert any(arg.endswith(":/tmp") for arg in test) and "PYTHONDONTWRITEBYTECODE=1" in test
    assert (tmp_path / "work" / "stage-0" / "opt" / "w.whl").read_text() == "wheel"
    assert not (tmp_path / "work" / "stage-1").exists()  # packed, then removed
    assert fakes.packed["opt/venv.new/made"] == "built\n"  # the build stage's output
    assert fakes.packed[".singularity.d/Singularity"] == TEMPLATE  # as committed, not as substituted
    assert fakes.stamped == [(tmp_path / "out.sif", reproducible.SOURCE_DATE_EPOCH)]
    labels = json.loads(fakes.packed[".singularity.d/labels.json"])
    assert (
        labels["org.example.target"] == "demo" and labels["org.label-schema.usage.singularity.deffile.stage"] == "final"
    )
    objects = [c for c in fakes.commands if c[1:3] == ["sif", "add"]]
    assert [c[c.index("--datatype") + 1] for c in objects] == ["1", "6", "4"]
    assert objects[1][objects[1].index("--filename") + 1] == "inspect-metadata.json"  # `inspect` finds it by name
    assert objects[2][objects[2].index("--partarch") + 1] == "2"  # amd64, from the image's /bin/sh


def test_a_stage_not_from_an_image_or_a_path_out_of_it_is_one_line(tmp_path, monkeypatch):
    Fakes(monkeypatch)
    with pytest.raises(ToolError, match=r"starts from 'debootstrap': a build without privilege starts only from"):
        unpacked.build(steps(tmp_path), "Bootstrap: debootstrap\nFrom: bookworm\n", tmp_path / "w", tmp_path / "o.sif")
    root = tmp_path / "root"
    (root / "opt").mkdir(parents=True)
    (root / "opt" / "out").symlink_to(tmp_path)  # a link the image holds, to this host's folder
    with pytest.raises(ToolError, match="leads out of the image"):
        unpacked._inside(root, "/opt/out/x")
    assert unpacked._inside(root, "/opt/new/x") == root.resolve() / "opt" / "new" / "x"
