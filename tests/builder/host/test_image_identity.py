"""An image answers for the target it was built as (issue 47): every command that takes a
target and its image (smoke, publish, sign, export, extend) compares the image's own labels
(target, arch, GPU archs, torch flavour) with the target named, and refuses another's image
in one line, exit 2, before it writes anything. Unit tests with the fake runner first, then
the real CPU image placed as a100-cuda's."""

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import RECIPES, run_builder
from helpers.fake_runner import CPU_LABELS, FakeRunner

from builder.errors import RecipeError
from builder.host import images
from builder.labels import LABEL_PREFIX
from builder.recipes.tree import RecipeTree


def answer(labels: dict) -> dict:
    return {"apptainer": json.dumps({"data": {"attributes": {"labels": labels}}})}


def built(tmp_path, name):
    (tmp_path / f"{RecipeTree(RECIPES).target(name).name}.sif").write_bytes(b"an image")
    return images.built_image(RecipeTree(RECIPES), name, tmp_path)


def test_an_image_of_the_target_named_passes_and_gives_its_labels(monkeypatch, tmp_path):
    FakeRunner(monkeypatch, answers=answer(CPU_LABELS))
    labels = images.checked_labels("apptainer", built(tmp_path, "cpu"))
    assert labels["target"] == "cpu" and labels["version.torch"] == "2.13.0"


def test_the_identity_is_what_the_provenance_block_writes(tree):
    for name in ("cpu", "a100-cuda", "h100-cuda", "lumi-rocm"):
        target = tree.target(name)
        wanted = images.identity(target)
        assert wanted["target"] == name and wanted["torch"] == target.torch.flavour
        assert wanted["gpu.arch"] == (",".join(target.archs) or "none")
    assert images.identity(tree.target("a100-cuda"))["gpu.arch"] == "sm_80"


@pytest.mark.parametrize(
    "changed, shown",
    [
        ({"target": "a100-cuda"}, "built as a100-cuda (x86_64, GPU none, torch cpu), not as cpu"),
        ({"arch": "aarch64"}, "built as cpu (aarch64, GPU none, torch cpu)"),
        ({"gpu.arch": "sm_80"}, "built as cpu (x86_64, GPU sm_80, torch cpu)"),
        ({"recipe": json.dumps({"torch": {"flavour": "cuda"}})}, "built as cpu (x86_64, GPU none, torch cuda)"),
    ],
)
def test_any_label_of_another_build_is_one_line(monkeypatch, tmp_path, changed, shown):
    labels = {**CPU_LABELS, **{f"{LABEL_PREFIX}.{key}": value for key, value in changed.items()}}
    FakeRunner(monkeypatch, answers=answer(labels))
    with pytest.raises(RecipeError) as raised:
        images.checked_labels("apptainer", built(tmp_path, "cpu"))
    message = str(raised.value)
    assert shown in message and "\n" not in message
    assert message.startswith(f"{tmp_path / 'cpu.sif'}: ") and "make build TARGET=cpu" in message


def test_an_image_without_the_projects_labels_is_not_taken(monkeypatch, tmp_path):
    FakeRunner(monkeypatch, answers=answer({"org.label-schema.build-arch": "amd64"}))
    with pytest.raises(RecipeError, match=r"not an image this builder made \(no org.hpc-ml-containers.target label\)"):
        images.checked_labels("apptainer", built(tmp_path, "cpu"))


def test_an_alias_takes_the_image_of_its_target(monkeypatch, tmp_path):
    tree = RecipeTree(RECIPES)
    alias, name = next(iter(tree.aliases.items()))
    own = images.identity(tree.target(name))
    labels = {f"{LABEL_PREFIX}.{key}": value for key, value in own.items() if key != "torch"}
    labels[f"{LABEL_PREFIX}.recipe"] = json.dumps({"torch": {"flavour": own["torch"]}})
    FakeRunner(monkeypatch, answers=answer(labels))
    assert images.checked_labels("apptainer", built(tmp_path, alias))["target"] == name


# --- the real CPU image, placed as a100-cuda's -----------------------------------------------


def listing(folder: Path) -> list:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


@pytest.fixture
def impostor(cpu_image, tmp_path):
    """An images folder where a100-cuda.sif is the CPU image (a hard link: no copy of GBs)."""
    folder = tmp_path / "images"
    folder.mkdir()
    try:
        os.link(cpu_image, folder / "a100-cuda.sif")
    except OSError:  # another filesystem
        (folder / "a100-cuda.sif").symlink_to(cpu_image)
    return folder


def private_key(folder: Path) -> Path:
    key = folder / "admin.pem"
    argv = ["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", key]
    subprocess.run(argv, check=True, capture_output=True, timeout=60)
    return key


@pytest.mark.parametrize("command", ["smoke", "publish", "sign", "export", "extend"])
def test_the_cpu_image_named_as_a100_cuda_is_refused_by_every_command(impostor, apptainer, tmp_path, command):
    elsewhere = tmp_path / "inputs"
    elsewhere.mkdir()
    (elsewhere / "Dockerfile").write_text("RUN true\n")
    args = {
        "smoke": [],
        "publish": ["--prefix", impostor / "modules", "--skip-smoke"],
        "sign": ["--key", private_key(elsewhere)],
        "export": ["--format", "oci"],
        "extend": [elsewhere / "Dockerfile", "--name", "a100-project"],
    }[command]
    before = listing(impostor)
    result = run_builder(command, "a100-cuda", *args, "--images", impostor, env={"HPCML_APPTAINER": apptainer})
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert (
        "a100-cuda.sif: the image was built as cpu (x86_64, GPU none, torch cpu), "
        "not as a100-cuda (x86_64, GPU sm_80, torch cuda)" in result.stderr
    )
    assert listing(impostor) == before  # no report, module, signature, export or lock file


def test_jobscript_refuses_the_cpu_image_given_as_a100_cudas(impostor, apptainer):
    args = ("jobscript", "a100-cuda", "--site", "karolina", "--account", "OPEN-00-00")
    result = run_builder(
        *args, "--image", impostor / "a100-cuda.sif", "--", "examples/ddp_cnn.py", env={"HPCML_APPTAINER": apptainer}
    )
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert (
        result.stderr.count("\n") == 1
        and "built as cpu (x86_64, GPU none, torch cpu), not as a100-cuda" in result.stderr
    )
    # its own target takes it
    own = run_builder("jobscript", "cpu", "--image", impostor / "a100-cuda.sif", "--", "examples/ddp_cnn.py")
    assert own.returncode == 0 and "export SING_IMAGE=" in own.stdout, own.stderr


@pytest.mark.parametrize(
    "labels, note",
    [
        ({"org.label-schema.build-arch": "amd64"}, "not built by this builder; not checked against a100-cuda"),
        (None, "its labels were not read ("),
    ],
)
def test_jobscript_notes_an_image_it_cannot_check_and_writes_the_script(monkeypatch, tmp_path, labels, note):
    from helpers.cli_here import run_here

    (tmp_path / "site.sif").write_bytes(b"a site's own image")
    said = answer(labels)["apptainer"] if labels else "not json"
    FakeRunner(monkeypatch, answers={"true": said})
    monkeypatch.setenv("HPCML_APPTAINER", "/bin/true")  # an Apptainer found; the fake answers for it
    args = ("jobscript", "a100-cuda", "--site", "karolina", "--account", "OPEN-00-00", "--image", tmp_path / "site.sif")
    result = run_here(*args, "--", "examples/ddp_cnn.py")
    assert result.returncode == 0, result.stderr
    assert f"--image {tmp_path / 'site.sif'}: {note}" in result.stderr
    assert f"export SING_IMAGE={tmp_path / 'site.sif'}" in result.stdout
