"""`hpcml export` without an image (issue 35): bad input is one line and exit 2 with nothing
written; the EDF is TOML with the keys CSCS documents; labels become OCI annotations; a failed
or interrupted export leaves the previous files as they were. The runner is a fake that answers
as apptainer, unsquashfs, umoci, tar and mksquashfs would (the real tools: test_export_image.py)."""

import json
import subprocess
import tomllib
from pathlib import Path

import pytest
from helpers.cli_here import run_here
from helpers.fake_runner import IMAGE_ANSWERS, FakeRunner

from builder.errors import ToolError
from builder.export import edf, enroot, metadata, write
from builder.export.metadata import ImageMetadata
from builder.labels import LABEL_PREFIX, ImageLabels

ROOT = Path(__file__).resolve().parents[3]
BUILD_DATE = "Friday_27_November_2026_4:57:38_UTC"
LABELS = {
    "org.label-schema.build-arch": "amd64",
    "org.label-schema.build-date": BUILD_DATE,
    f"{LABEL_PREFIX}.target": "cpu",
    f"{LABEL_PREFIX}.version.torch": "2.13.0",
    f"{LABEL_PREFIX}.recipe": json.dumps({"description": "CPU-only, for tests", "torch": {"flavour": "cpu"}}),
}
ENVIRONMENT = {"PATH": "/opt/venv/bin:/usr/bin:/bin", "DS_ACCELERATOR": "cpu", "VIRTUAL_ENV": "/opt/venv"}
SIF_LIST = """------------------------------------------------------------------------------
ID   |GROUP   |LINK    |SIF POSITION (start-end)  |TYPE
------------------------------------------------------------------------------
1    |1       |NONE    |32176-32757               |Def.FILE
2    |1       |NONE    |32757-35087               |JSON.Generic
3    |1       |NONE    |36864-1112637440          |FS (Squashfs/*System/amd64)
"""
# environment before the image's script, the marker, after it (metadata.environment's `sh`)
SH_ENV = "\0".join(
    ["PATH=" + metadata.DEFAULT_PATH, "PWD=/w", "--hpcml-export-after--", "PWD=/w"]
    + [f"{name}={value}" for name, value in ENVIRONMENT.items()]
)


def cpu_meta(**labels) -> ImageMetadata:
    return ImageMetadata("cpu", dict(ENVIRONMENT), ImageLabels({**LABELS, **labels}))


def cuda_meta(runtime="13.0") -> ImageMetadata:
    recipe = json.dumps({"torch": {"flavour": "cuda"}})
    extra = {f"{LABEL_PREFIX}.recipe": recipe} | ({f"{LABEL_PREFIX}.cuda.runtime": runtime} if runtime else {})
    return cpu_meta(**extra)


def snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): None if p.is_dir() else p.read_bytes() for p in sorted(root.rglob("*"))}


# --- bad input: one line, exit 2, nothing written ---------------------------------------------


@pytest.mark.parametrize(
    "args, built, expected",
    [
        (["nosuch", "--format", "oci"], False, "nosuch"),
        (["cpu", "--format", "oci"], False, "cpu.sif: no image; build it first with"),
        (["cpu", "--format", "tar"], True, "--format 'tar': expected one or more of oci, enroot, edf"),
        (["cpu", "--format", "oci,zip"], True, "--format 'zip': expected one or more of oci, enroot, edf"),
        (["cpu", "--format", ""], True, "--format '': expected one or more of oci, enroot, edf"),
        (["cpu"], True, "the following arguments are required: --format"),
        (["cpu", "--format", "edf", "--image-path", "images/cpu.sqsh"], True, "--image-path 'images/cpu.sqsh'"),
        (["cpu", "--format", "edf"], True, "cpu.sqsh: no squashfs for the EDF to name; export it first with"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, args, built, expected):
    if built:
        (tmp_path / "cpu.sif").write_bytes(b"an image")
    before = snapshot(tmp_path)
    result = run_here("export", *args, "--images", tmp_path, cwd=ROOT)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], lines
    assert snapshot(tmp_path) == before


def test_the_example_in_help_is_an_export_of_every_format():
    result = run_here("export", "--help", cwd=ROOT)
    assert result.returncode == 0
    assert "export cpu --format oci,enroot,edf --image-path '${SCRATCH}/images/cpu.sqsh'" in result.stdout


# --- the EDF ---------------------------------------------------------------------------------

CSCS_KEYS = {"base_environment", "image", "workdir", "entrypoint", "writable", "mounts", "env", "annotations"}


def test_the_edf_of_a_cpu_image_is_toml_with_cscs_keys_and_no_hook():
    text = edf.text(cpu_meta(), "/scratch/images/cpu.sqsh")
    parsed = tomllib.loads(text)
    assert set(parsed) <= CSCS_KEYS
    assert parsed["image"] == "/scratch/images/cpu.sqsh"
    assert parsed["workdir"] == "${SCRATCH}" and parsed["mounts"] == ["${SCRATCH}:${SCRATCH}"]
    assert parsed["env"] == ENVIRONMENT
    assert "annotations" not in parsed  # no NCCL in a CPU image


def test_a_cuda_image_asks_for_the_aws_ofi_nccl_hook_of_its_cuda_major():
    parsed = tomllib.loads(edf.text(cuda_meta("13.0"), "${SCRATCH}/a100-cuda.sqsh"))
    hooks = parsed["annotations"]["com"]["hooks"]
    assert hooks["aws_ofi_nccl"] == {"enabled": "true", "variant": "cuda13"}
    assert hooks["netstack"] == {"source": "host"}
    assert (
        tomllib.loads(edf.text(cuda_meta("12.8"), "/x.sqsh"))["annotations"]["com"]["hooks"]["aws_ofi_nccl"]["variant"]
        == "cuda12"
    )


def test_a_cuda_image_of_an_unknown_cuda_gets_the_dynamically_linked_variant():
    hooks = tomllib.loads(edf.text(cuda_meta(""), "/x.sqsh"))["annotations"]["com"]["hooks"]
    assert hooks == {"aws_ofi_nccl": {"enabled": "true", "variant": "cuda-dl"}}


def test_a_rocm_image_gets_no_hook():
    rocm = cpu_meta(**{f"{LABEL_PREFIX}.recipe": json.dumps({"torch": {"flavour": "rocm"}})})
    assert "annotations" not in tomllib.loads(edf.text(rocm, "/x.sqsh"))


def test_edf_values_survive_toml_and_the_engines_dollar_expansion():
    odd = 'a "quoted" \\ back\tslash ${HOME} $x é \x01 \x7f'
    image = ImageMetadata("cpu", {"PATH": "/bin", "ODD": odd, "with.dot": "1"}, ImageLabels(LABELS))
    env = tomllib.loads(edf.text(image, "/x.sqsh"))["env"]
    assert env["ODD"].replace("$$", "$") == odd and env["with.dot"] == "1"


# --- labels into annotations -----------------------------------------------------------------


def test_every_label_is_an_annotation_with_the_oci_ones_we_know():
    annotations = metadata.annotations(cpu_meta())
    assert {key: annotations[key] for key in LABELS} == LABELS
    assert annotations["org.opencontainers.image.title"] == "cpu"
    assert annotations["org.opencontainers.image.version"] == "2.13.0"
    assert annotations["org.opencontainers.image.created"] == "2026-11-27T04:57:38Z"
    assert annotations["org.opencontainers.image.description"] == "CPU-only, for tests"


def test_an_image_without_a_build_date_or_torch_label_has_no_such_annotation():
    image = ImageMetadata("cpu", dict(ENVIRONMENT), ImageLabels({"org.label-schema.build-date": "yesterday"}))
    annotations = metadata.annotations(image)
    assert "org.opencontainers.image.created" not in annotations
    assert "org.opencontainers.image.version" not in annotations


@pytest.mark.parametrize(
    "label, created",
    [
        (BUILD_DATE, "2026-11-27T04:57:38Z"),
        ("Monday_5_January_2026_14:03:09_UTC", "2026-01-05T14:03:09Z"),
        ("Monday_5_Janvier_2026_14:03:09_UTC", ""),
        ("", ""),
    ],
)
def test_apptainers_build_date_as_rfc_3339(label, created):
    assert metadata.build_date(label) == created
    if created:
        assert metadata.epoch(created) == int(
            subprocess.run(["date", "-u", "-d", created, "+%s"], capture_output=True, text=True).stdout
        )


def test_the_environment_is_what_the_image_script_exports_on_the_default_path():
    script = 'export VIRTUAL_ENV=/opt/venv\nexport PATH="/opt/venv/bin:${PATH}"\nNOT_EXPORTED=1\nexport E="a b"\n'
    assert metadata.environment(script) == {
        "PATH": "/opt/venv/bin:" + metadata.DEFAULT_PATH,
        "E": "a b",
        "VIRTUAL_ENV": "/opt/venv",
    }
    assert metadata.environment("# nothing\n") == {"PATH": metadata.DEFAULT_PATH}


# --- enroot's /etc/environment -----------------------------------------------------------------


def test_etc_environment_keeps_the_images_lines_and_adds_the_environment(tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "environment").write_text("LANG=C.UTF-8")
    enroot.add_environment(tmp_path, ENVIRONMENT, 1795755458)
    lines = (tmp_path / "etc" / "environment").read_text().splitlines()
    assert lines[0] == "LANG=C.UTF-8" and lines[1].startswith("# ")
    assert lines[2:] == [f"{name}={value}" for name, value in ENVIRONMENT.items()]
    assert (tmp_path / "etc" / "environment").stat().st_mtime == 1795755458


def test_etc_environment_is_never_written_through_a_link(tmp_path):
    outside = tmp_path / "host-file"
    outside.write_text("host\n")
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "environment").symlink_to(outside)
    with pytest.raises(ToolError, match="not a plain file"):
        enroot.add_environment(root, ENVIRONMENT, None)
    assert outside.read_text() == "host\n"


# --- the whole export, with the fake tools -----------------------------------------------------


class FakeTools(FakeRunner):
    """apptainer sif list, unsquashfs -cat, the environment's sh; a logged command writes its
    output file (unsquashfs -d its root, tar -cf and mksquashfs their files) or fails as
    ``fail`` says ({program: exception})."""

    def __init__(self, monkeypatch, fail=None):
        super().__init__(monkeypatch)
        self.fail = fail or {}

    def run(self, argv, **kwargs):
        argv = [str(a) for a in argv]
        self.commands.append(argv)
        program = Path(argv[0]).name
        out = {"apptainer": SIF_LIST, "sh": SH_ENV}.get(program, "")
        if argv[1:2] == ["inspect"]:
            out = IMAGE_ANSWERS[("inspect",)]
        if program == "unsquashfs" and "-cat" in argv:
            out = json.dumps(LABELS) if argv[-1] == metadata.LABELS_FILE else "export A=1\n"
        return subprocess.CompletedProcess(argv, 0, out, "")

    def run_logged(self, argv, log_path, **kwargs):
        argv = [str(a) for a in argv]
        self.commands.append(argv)
        program = Path(argv[0]).name
        if program in self.fail:
            raise self.fail[program]
        if program == "unsquashfs":
            root = Path(argv[argv.index("-d") + 1])
            (root / "etc").mkdir(parents=True)
        elif program == "tar":
            Path(argv[argv.index("-cf") + 1]).write_bytes(b"new archive")
        elif program == "mksquashfs":
            Path(argv[2]).write_bytes(b"new squashfs")


@pytest.fixture
def images(tmp_path, monkeypatch):
    """An images folder with a stand-in image and a previous export of each format."""
    monkeypatch.setattr(write, "ready_apptainer", lambda site: "apptainer")
    monkeypatch.setattr(write.os, "geteuid", lambda: 0)
    (tmp_path / "cpu.sif").write_bytes(b"an image")
    for form in write.FORMATS:
        write.output(tmp_path, "cpu", form).write_bytes(b"previous")
    return tmp_path


def test_an_export_of_every_format_replaces_each_file(images, monkeypatch):
    fake = FakeTools(monkeypatch)
    result = run_here("export", "cpu", "--format", "edf,oci", "--format", "enroot", "--images", images, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert (images / "cpu.oci.tar").read_bytes() == b"new archive"
    assert (images / "cpu.sqsh").read_bytes() == b"new squashfs"
    parsed = tomllib.loads((images / "cpu.toml").read_text())
    assert parsed["image"] == str((images / "cpu.sqsh").resolve()) and parsed["env"]["VIRTUAL_ENV"] == "/opt/venv"
    logged = [argv[:2] for argv in fake.commands if Path(argv[0]).name in ("umoci", "tar", "mksquashfs")]
    assert [argv[0] for argv in logged] == ["umoci"] * 5 + ["tar", "mksquashfs"]  # the OCI first, then enroot
    assert [argv[1] for argv in logged[:5]] == ["init", "new", "insert", "config", "gc"]
    config = next(argv for argv in fake.commands if argv[:2] == ["umoci", "config"])
    assert "org.opencontainers.image.created=2026-11-27T04:57:38Z" in config and "2026-11-27T04:57:38Z" in config
    assert sorted(p.name for p in images.iterdir()) == sorted(
        [".cpu.export.lock", ".cpu.lock", "cpu.export.log", "cpu.oci.tar", "cpu.sif", "cpu.sqsh", "cpu.toml"]
    )


@pytest.mark.parametrize("failure", [ToolError("mksquashfs failed (exit status 1)"), KeyboardInterrupt()])
def test_a_failed_or_interrupted_export_leaves_the_previous_files(images, monkeypatch, failure):
    FakeTools(monkeypatch, fail={"mksquashfs": failure})
    before = {form: write.output(images, "cpu", form).read_bytes() for form in write.FORMATS}
    result = run_here("export", "cpu", "--format", "oci,enroot,edf", "--images", images, cwd=ROOT)
    assert result.returncode == (130 if isinstance(failure, KeyboardInterrupt) else 1), result.stderr
    assert {form: write.output(images, "cpu", form).read_bytes() for form in write.FORMATS} == before
    leftovers = [p.name for p in images.iterdir() if p.name.startswith(".cpu.") and not p.name.endswith(".lock")]
    assert leftovers == []  # no temporary file, no work folder


def test_what_a_killed_export_left_is_removed_by_the_next(images, monkeypatch):
    FakeTools(monkeypatch)
    (images / ".cpu.export-abc123" / "rootfs").mkdir(parents=True)
    (images / ".cpu.sqsh.tmp-999").write_bytes(b"half")
    assert run_here("export", "cpu", "--format", "enroot", "--images", images, cwd=ROOT).returncode == 0
    assert not (images / ".cpu.export-abc123").exists() and not (images / ".cpu.sqsh.tmp-999").exists()


def test_an_edf_alone_names_the_squashfs_already_exported(images, monkeypatch):
    fake = FakeTools(monkeypatch)
    result = run_here("export", "cpu", "--format", "edf", "--image-path", "${SCRATCH}/cpu.sqsh", "--images", images)
    assert result.returncode == 0, result.stderr
    assert tomllib.loads((images / "cpu.toml").read_text())["image"] == "${SCRATCH}/cpu.sqsh"
    assert (images / "cpu.sqsh").read_bytes() == b"previous"
    assert not [argv for argv in fake.commands if "-d" in argv or Path(argv[0]).name == "mksquashfs"]  # not unpacked
