"""layerbuild.sandbox_files: /.singularity.d/ written as `apptainer build` leaves it (labels
merged in its order, the definition kept in bootstrap_history, %environment appended, the
scripts), and the modes an ordinary user must open on an unpacked image and put back."""

import json
import os
import stat

from builder.layerbuild import sandbox_files
from builder.render import def_reader

DEFINITION = """Bootstrap: localimage
From: base.sif
Stage: final

%environment
export X=1

%test
python -m smoke

%labels
org.example.target demo
org.example.kept from-the-definition
"""


def _root(tmp_path):
    root = tmp_path / "root"
    (root / "bin").mkdir(parents=True)
    # an x86-64 ELF header is all architecture() reads: e_machine 0x3e at byte 18
    (root / "bin" / "dash").write_bytes(b"\x7fELF" + bytes(14) + b"\x3e\x00" + bytes(44))
    os.symlink("dash", root / "bin" / "sh")
    meta = root / ".singularity.d"
    (meta / "env").mkdir(parents=True)
    (meta / "labels.json").write_text(json.dumps({"org.example.kept": "from-the-image", "base": "1"}))
    (meta / "env" / "90-environment.sh").write_text("#!/bin/sh\nexport BASE=1\n")
    (meta / "Singularity").write_text("the base image's definition\n")
    (root / ".build.labels").write_text("org.example.measured 2.10.0\n")
    return root


def test_the_metadata_is_written_as_apptainer_writes_it(tmp_path):
    root = _root(tmp_path)
    (stage,) = def_reader.stages(DEFINITION)
    sandbox_files.insert(root, stage, DEFINITION, "1.4.5")
    meta = root / ".singularity.d"
    labels = json.loads((meta / "labels.json").read_text())
    assert labels["org.example.kept"] == "from-the-image"  # %labels does not overwrite, as without --force
    assert labels["org.example.target"] == "demo" and labels["org.example.measured"] == "2.10.0"
    assert labels["org.label-schema.build-date"] == "Thursday_1_January_2026_0:0:0_UTC"  # SOURCE_DATE_EPOCH
    assert labels["org.label-schema.build-arch"] == "amd64"
    assert labels["org.label-schema.usage.singularity.deffile.from"] == "base.sif"
    assert labels["org.label-schema.usage.apptainer.version"] == "1.4.5"
    assert not (root / ".build.labels").exists()
    assert (meta / "Singularity").read_text() == DEFINITION
    assert (meta / "bootstrap_history" / "Apptainer0").read_text() == "the base image's definition\n"
    assert (meta / "env" / "90-environment.sh").read_text() == "#!/bin/sh\nexport BASE=1\n\nexport X=1\n\n\n"
    assert (meta / "test").read_text() == "#!/bin/sh\n\npython -m smoke\n\n\n"
    assert stat.S_IMODE((meta / "test").stat().st_mode) == 0o755


def test_modes_the_user_cannot_work_with_are_opened_then_put_back(tmp_path):
    root = _root(tmp_path)
    locked, secret = root / "proc", root / "etc" / "shadow"
    secret.parent.mkdir()
    secret.write_text("x")
    secret.chmod(0o000)
    locked.mkdir(mode=0o555)
    locked.chmod(0o555)
    changed = sandbox_files.opened(root)
    assert {path for path, _ in changed} == {locked, secret}
    assert stat.S_IMODE(locked.stat().st_mode) == 0o755 and stat.S_IMODE(secret.stat().st_mode) == 0o400
    sandbox_files.restored(changed)
    assert stat.S_IMODE(locked.stat().st_mode) == 0o555 and stat.S_IMODE(secret.stat().st_mode) == 0o000
