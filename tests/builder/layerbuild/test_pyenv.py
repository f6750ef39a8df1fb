"""layerbuild/pyenv.py's refusals before anything runs (a lock of another target or of another
image lock, a wrong --out), and pyenv_inside.py's parts that need no image: what the image
holds, read from its .dist-info folders, and a lock that would replace one of them. The build
itself, on the real image: tests/images/test_pyenv_build.py."""

import hashlib
from pathlib import Path

import pytest

from builder import contract, pyenv_inside, pyenv_lock
from builder.bundle import manifest
from builder.errors import RecipeError
from builder.host import pyenv_file
from builder.host.images import Built
from builder.host.progress import Progress
from builder.layerbuild import pyenv


def write_lock(tmp_path, tree, target="cpu", image_lock=None) -> Path:
    if image_lock is None:
        image_lock = hashlib.sha256((Path(tree.root) / "locks" / "cpu" / "python.txt").read_bytes()).hexdigest()
    lock = pyenv_lock.PyenvLock(target, "3.11", "x86_64-manylinux_2_36", image_lock, "requirements.txt", ("a",), ())
    path = tmp_path / f"requirements.{target}.lock"
    path.write_text(lock.text("hpcml env lock"))
    return path


def build(tree, lock, **options):
    target = tree.target("cpu")
    built = Built(target, target.sites[0], Path("/nonexistent/images/cpu.sif"))
    return pyenv.build(built, lock, progress=Progress(), **options)


def test_a_lock_of_another_target_is_refused_before_anything_runs(tree, tmp_path):
    lock = write_lock(tmp_path, tree, target="a100-cuda")
    with pytest.raises(RecipeError) as caught:
        build(tree, lock)
    assert str(caught.value).startswith(f"{lock}: the lock is for image a100-cuda, not cpu; lock your requirements")
    assert list(tmp_path.iterdir()) == [lock]


def test_a_lock_made_against_another_lock_of_the_target_is_refused(tree, tmp_path):
    lock = write_lock(tmp_path, tree, image_lock="0" * 64)
    with pytest.raises(RecipeError) as caught:
        build(tree, lock)
    assert str(caught.value) == (
        f"{lock}: the lock was made against another lock of cpu than recipes/locks/cpu/python.txt now; "
        "lock it again with: hpcml env lock cpu requirements.txt"
    )


def test_an_out_that_is_no_squashfs_name_is_refused(tree, tmp_path):
    with pytest.raises(RecipeError, match=r"--out .*env.img: expected a file name ending in .sqsh"):
        build(tree, write_lock(tmp_path, tree), out=tmp_path / "env.img")


def test_the_names_of_the_env_file_its_sbom_and_its_log_follow_the_lock():
    out = pyenv.default_out(Path("project/requirements.cpu.lock"))
    assert out == Path("project/requirements.cpu.sqsh")
    assert pyenv.sbom_path(out) == Path("project/requirements.cpu.sbom.json")


def test_what_the_image_holds_is_read_from_its_dist_info_folders(tmp_path):
    for name in ("numpy-2.4.6", "typing_extensions-4.16.0", "torch-2.13.0+cpu", "Jinja2-3.1.6"):
        (tmp_path / f"{name}.dist-info").mkdir(parents=True)
    held = pyenv_inside.held_by_image([str(tmp_path)])
    assert held == {"numpy": "2.4.6", "typing-extensions": "4.16.0", "torch": "2.13.0+cpu", "jinja2": "3.1.6"}


def test_a_lock_that_would_replace_an_image_distribution_is_named_pin_by_pin(tmp_path):
    lock = tmp_path / "x.lock"
    lock.write_text(
        "# image: cpu, ...\nNumPy==2.5.0 --hash=sha256:00  # numpy.whl\nalpha==1.0 --hash=sha256:11\n"
        "typing_extensions==4.17 --hash=sha256:22\n"
    )
    held = {"numpy": "2.4.6", "typing-extensions": "4.16.0"}
    assert pyenv_inside.replaced(str(lock), held) == [
        "numpy (the image holds 2.4.6)",
        "typing-extensions (the image holds 4.16.0)",
    ]


def test_the_inside_script_and_the_builder_agree_on_their_names():
    """It runs in the image and imports nothing of the builder: its copies must match."""
    assert pyenv_inside.MARKER == contract.FAILURE_MARKER
    assert pyenv_inside.RECORD == pyenv_file.RECORD


def test_an_env_file_that_is_none_is_one_line(tmp_path):
    text = tmp_path / "x.sqsh"
    text.write_text("not a squashfs")
    with pytest.raises(RecipeError, match=r"x.sqsh: not an env file \(no squashfs header\)"):
        pyenv_file.record(text)
    with pytest.raises(RecipeError, match=r"nothing.sqsh: no such file"):
        pyenv_file.record(tmp_path / "nothing.sqsh")


def test_a_lock_edited_to_replace_an_image_pin_is_refused_before_anything_runs(tree, tmp_path):
    lock = write_lock(tmp_path, tree)
    lock.write_text(lock.read_text() + "numpy==2.5.0 --hash=sha256:" + "0" * 64 + "\n")
    with pytest.raises(RecipeError) as caught:
        build(tree, lock)
    assert str(caught.value).startswith(
        f"{lock}: the lock names distributions the image holds, which an env never replaces: numpy (the image "
        "holds 2.4.6); lock it again with: hpcml env lock cpu requirements.txt"
    )


def test_a_bundle_without_the_envs_files_is_refused_in_one_line_before_anything_runs(tree, tmp_path):
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    manifest.write(bundle, {})
    lock = write_lock(tmp_path, tree)
    lock.write_text(lock.read_text() + "alpha==1.0 --hash=sha256:" + "0" * 64 + "\n")
    with pytest.raises(RecipeError) as caught:
        build(tree, lock, bundle=bundle)
    assert str(caught.value).startswith(f"{bundle}: holds no file of alpha 1.0 that the env lock names; add them")
    with pytest.raises(RecipeError, match="no SHA256SUMS there, so not a bundle"):
        build(tree, lock, bundle=tmp_path)
