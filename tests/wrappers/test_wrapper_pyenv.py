"""SING_PYENV: the wrapper binds a project env's file and activates it, with a recorder for the
runtime (no image), and the env's own check script (builder/pyenv_inside.py's), run here with
sh: it runs the command on the image it was built for and refuses any other in one line.
The same with the real image and a real env: tests/images/test_pyenv_build.py."""

import os
import shlex
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, SIF_HEADER

from builder import pyenv_inside

WRAPPER = ROOT / "wrappers" / "singularity_wrapper"
PREFIX = "error: singularity_wrapper: "


@pytest.fixture
def env(tmp_path):
    """A clean environment whose runtime prints its arguments, one a line, and the variables it
    would hand the container."""
    recorder = tmp_path / "apptainer"
    recorder.write_text(
        "#!/bin/sh\n"
        'printf "%s\\n" "$@"\n'
        'echo "PYTHONPATH=$APPTAINERENV_PYTHONPATH PREPEND_PATH=$APPTAINERENV_PREPEND_PATH"\n'
    )
    recorder.chmod(0o755)
    image = tmp_path / "image.sif"
    image.write_bytes(SIF_HEADER)
    # no TMPDIR: the local site binds it, which would come before the env's bind; no
    # PYTHONPATH: the wrapper keeps the caller's after the env's
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TMPDIR", "PYTHONPATH") and not k.startswith(("SLURM_", "SING_", "HPCML_", "APPTAINER"))
    }
    return dict(clean, SING_IMAGE=str(image), HPCML_APPTAINER=str(recorder), HPCML_SITE="local")


@pytest.fixture
def pyenv(tmp_path):
    """A file with a squashfs header, as the wrapper checks it (the runtime is a recorder)."""
    path = tmp_path / "project env" / "requirements.cpu.sqsh"
    path.parent.mkdir()
    path.write_bytes(b"hsqs" + bytes(92))
    return path


def wrap(*args, env):
    return subprocess.run([str(WRAPPER), *map(str, args)], env=env, capture_output=True, text=True, timeout=60)


def test_the_env_is_bound_read_only_at_its_path_and_each_command_starts_through_its_check(env, pyenv):
    result = wrap("exec", "python", "train.py", env=dict(env, SING_PYENV=str(pyenv)))
    assert result.returncode == 0, result.stderr
    argv = result.stdout.splitlines()
    assert argv[:3] == ["exec", "--bind", f"{pyenv}:/opt/pyenv:ro,image-src=/"]
    assert argv[3:7] == [env["SING_IMAGE"], "/opt/pyenv/bin/hpcml-pyenv-check", "python", "train.py"]
    # the env's packages for every Python of the image (torchrun's workers run the image's own)
    assert argv[-1] == "PYTHONPATH=/opt/pyenv/site-packages PREPEND_PATH=/opt/pyenv/bin"


def test_the_users_pythonpath_stays_after_the_envs(env, pyenv):
    result = wrap("exec", "true", env=dict(env, SING_PYENV=str(pyenv), PYTHONPATH="/project/src"))
    assert result.stdout.splitlines()[-1].startswith("PYTHONPATH=/opt/pyenv/site-packages:/project/src ")


def test_run_and_shell_check_the_env_too(env, pyenv):
    ran = wrap("run", "--epochs", "3", env=dict(env, SING_PYENV=str(pyenv))).stdout.splitlines()
    assert ran[0] == "exec" and ran[4:8] == [
        "/opt/pyenv/bin/hpcml-pyenv-check",
        "/.singularity.d/runscript",
        "--epochs",
        "3",
    ]
    shell = wrap("shell", env=dict(env, SING_PYENV=str(pyenv))).stdout.splitlines()
    assert shell[4:6] == ["/opt/pyenv/bin/hpcml-pyenv-check", "true"]  # checked first, then the shell
    assert shell[7] == "shell"


def test_without_sing_pyenv_nothing_changes(env):
    argv = wrap("exec", "true", env=env).stdout.splitlines()
    assert argv == ["exec", env["SING_IMAGE"], "true", "PYTHONPATH= PREPEND_PATH="]


@pytest.mark.parametrize(
    "value, message",
    [
        ("/no/such.sqsh", "SING_PYENV: no env file at /no/such.sqsh (expected the .sqsh file"),
        ("{folder}", "SING_PYENV: {folder} is not a readable file"),
        ("{text}", "SING_PYENV: {text} is not an env file (no squashfs header; 5 bytes)"),
        ("/a:b.sqsh", "SING_PYENV is '/a:b.sqsh': a path with ',', ':' or a control character"),
        ("/a\nb.sqsh", "SING_PYENV is '/a\\nb.sqsh': a path with"),
    ],
)
def test_a_wrong_env_file_is_one_line_and_nothing_runs(env, tmp_path, value, message):
    (tmp_path / "text.txt").write_text("text\n")
    names = {"folder": str(tmp_path), "text": str(tmp_path / "text.txt")}
    result = wrap("exec", "true", env=dict(env, SING_PYENV=value.format(**names)))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith(PREFIX + message.format(**names)) and result.stderr.count("\n") == 1


def check_script(tmp_path, sites, digest) -> Path:
    script = tmp_path / "hpcml-pyenv-check"
    script.write_text(
        pyenv_inside.CHECK_TEXT.format(
            sites=" ".join(pyenv_inside.quoted(str(site)) for site in sites),
            digest=digest,
            target=pyenv_inside.quoted("cpu"),
            built_on=pyenv_inside.quoted(f"image distributions sha256 {digest[:12]}"),
        )
    )
    script.chmod(0o755)
    return script


def site_packages(folder: Path, names) -> Path:
    folder.mkdir(parents=True)
    for name in names:
        (folder / f"{name}.dist-info").mkdir()
    (folder / "numpy").mkdir()  # not a .dist-info: no part of the digest
    return folder


def test_the_check_runs_the_command_on_the_image_it_was_built_for(tmp_path):
    # names whose order differs between bytes and a locale's collation: sh sorts as Python does
    site = site_packages(tmp_path / "site", ["numpy-2.4.6", "Jinja2-3.1.6", "_private-1.0", "torch-2.13.0+cpu"])
    script = check_script(tmp_path, [site], pyenv_inside.distributions_digest([str(site)]))
    result = subprocess.run([str(script), "sh", "-c", 'echo ran "$@"', "sh", "a b"], capture_output=True, text=True)
    assert (result.returncode, result.stdout, result.stderr) == (0, "ran a b\n", "")


def test_the_check_refuses_an_image_with_other_distributions_in_one_line(tmp_path):
    site = site_packages(tmp_path / "site", ["numpy-2.4.6", "torch-2.13.0+cpu"])
    digest = pyenv_inside.distributions_digest([str(site)])
    (site / "numpy-2.4.6.dist-info").rename(site / "numpy-2.5.0.dist-info")
    result = subprocess.run(
        [str(check_script(tmp_path, [site], digest)), "touch", str(tmp_path / "ran")], text=True, capture_output=True
    )
    assert result.returncode == 2 and not (tmp_path / "ran").exists()
    assert result.stderr == (
        f"{PREFIX}SING_PYENV: the env was built for another image (cpu, image distributions sha256 "
        f"{digest[:12]}); this image holds other distributions; build the env on it: hpcml env build TARGET LOCK\n"
    )


def test_the_check_script_passes_shellcheck(tmp_path):
    script = check_script(tmp_path, [tmp_path / "a", tmp_path / "b c"], "0" * 64)
    result = subprocess.run(["shellcheck", "-s", "sh", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + shlex.join([str(script)])
