"""`pip install .` (not editable) in a fresh venv gives a builder that renders, checks and
publishes on its own: templates, schemas, the wrapper and the runtime's source ship inside it."""

import os
import shutil
import subprocess
import sys

import pytest
from conftest import CONTAINERS, RECIPES, ROOT, run_lock

from builder.host import uv as host_uv
from builder.render import runtime_wheel


@pytest.fixture(scope="session")
def installed_builder(tmp_path_factory):
    """A fresh venv with the project installed (not editable) from this checkout.

    uv's pip installs it: the same wheel, built by the project's own PEP 517 backend
    (hatchling) in an isolated environment, from the sources the host's pip uses, in 3 s
    instead of pip's 20 (most of `make unit`'s longest setup). That pip itself, the README's
    `pip install .`, installs the very same files is test_pip_installs_what_uv_does (full)."""
    with run_lock(tmp_path_factory, "packaging") as folder:
        venv = folder / "venv"
        if not (venv / "done").exists():
            shutil.rmtree(venv, ignore_errors=True)
            uv = host_uv._uv()
            subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True, timeout=120)
            argv = [uv, "pip", "install", "--quiet", "--no-config", "--python", str(venv / "bin" / "python")]
            result = subprocess.run(
                [*argv, *host_uv.source_options(), str(ROOT)], capture_output=True, text=True, timeout=600
            )
            assert result.returncode == 0, result.stderr[-3000:]
            (venv / "done").touch()
    return venv / "bin" / "hpcml"


def _installed_files(venv):
    """The project's files in a venv, as its dist-info RECORD lists them: not the entry-point
    scripts (they name the venv's own python), nor the bytecode pip compiles and uv does not."""
    (record,) = venv.glob("lib/python*/site-packages/hpc_ml_containers-*.dist-info/RECORD")
    rows = [line.split(",") for line in record.read_text().splitlines()]
    return {
        row[0]: row[1]
        for row in rows
        if not row[0].startswith(("../", "hpc_ml_containers-")) and "__pycache__" not in row[0]
    }


@pytest.mark.full
def test_pip_installs_what_uv_does(installed_builder, tmp_path):
    """The README's line, `python3 -m venv ... && .../pip install .`, run for real."""
    venv = tmp_path / "pip-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    result = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", str(ROOT)], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert hpcml(venv / "bin" / "hpcml", "--version", cwd=tmp_path).stdout.strip() == "hpc-ml-containers 0.1.0"
    assert _installed_files(venv) == _installed_files(installed_builder.parent.parent)


def hpcml(command, *args, cwd, env=None):
    # no PYTHONPATH: the installed package, never this checkout's source
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [str(command), *map(str, args)],
        cwd=cwd,
        env=dict(clean, **(env or {})),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_version(installed_builder, tmp_path):
    result = hpcml(installed_builder, "--version", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.strip() == "hpc-ml-containers 0.1.0"


def test_the_installed_builder_renders_what_the_checkout_does(installed_builder, tmp_path):
    shutil.copytree(RECIPES, tmp_path / "recipes")
    result = hpcml(installed_builder, "render", "--all", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for path in CONTAINERS.glob("*.def"):
        assert (tmp_path / "containers" / path.name).read_text() == path.read_text(), path.name
    for path in (ROOT / "wrappers" / "sites").glob("*.sh"):
        assert (tmp_path / "wrappers" / "sites" / path.name).read_text() == path.read_text()
    # the runtime wheel built from the installed copy of runtime/ has the very same bytes
    wheels = list((tmp_path / "containers").glob("*.whl"))
    checkout = runtime_wheel.current()
    assert [w.name for w in wheels] == [checkout.name] and wheels[0].read_bytes() == checkout.data
    result = hpcml(installed_builder, "check", cwd=tmp_path)
    assert result.returncode == 0 and "up to date" in result.stdout, result.stderr


def test_the_installed_builder_publishes_a_module_with_its_wrapper(installed_builder, tmp_path, cpu_image, apptainer):
    shutil.copytree(RECIPES, tmp_path / "recipes")
    prefix = tmp_path / "appl"
    prefix.mkdir()
    result = hpcml(
        installed_builder,
        "publish",
        "cpu",
        "--images",
        cpu_image.parent,
        "--prefix",
        prefix,
        "--version",
        "pkg",
        "--skip-smoke",
        cwd=tmp_path,
        env={"HPCML_APPTAINER": apptainer},
    )
    assert result.returncode == 0, result.stderr
    wrapper = prefix / "pytorch" / "pkg" / "bin" / "singularity_wrapper"
    ran = subprocess.run(
        [str(wrapper), "exec", "python", "-c", "import launchenv, smoke; print('ok')"],
        env=dict(os.environ, SING_IMAGE=str(prefix / "pytorch" / "pkg" / "image.sif"), HPCML_APPTAINER=apptainer),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0 and ran.stdout == "ok\n", ran.stderr


def test_the_installed_builder_names_itself_and_hints_at_its_own_commands(installed_builder, tmp_path):
    shutil.copytree(RECIPES, tmp_path / "recipes")
    usage = hpcml(installed_builder, "--help", cwd=tmp_path)
    assert usage.returncode == 0 and usage.stdout.startswith("usage: hpcml "), usage.stdout[:200]
    jobscript_help = hpcml(installed_builder, "jobscript", "--help", cwd=tmp_path)
    assert jobscript_help.stdout.rstrip().endswith("-- train.py --epochs 10")
    # no Makefile here: the hint is a command that works where hpcml is installed
    result = hpcml(installed_builder, "smoke", "cpu", "--images", tmp_path / "none", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert f"build it first with: hpcml build cpu --images {tmp_path / 'none'}" in result.stderr
    assert "make " not in result.stderr


def test_doctor_of_the_installed_builder_runs_outside_a_checkout(installed_builder, tmp_path):
    result = hpcml(installed_builder, "doctor", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "/builder/_data/recipes (installed with the builder)\n" in result.stdout, result.stdout
    assert "\napptainer " in result.stdout


def test_the_installed_builder_writes_job_scripts_from_any_folder_with_its_own_recipes(installed_builder, tmp_path):
    """Issue 47: outside the checkout, `jobscript` said `recipes directory not found`; the
    wheel carries the recipes it was released with, and the script names absolute paths."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text("print('training')\n")
    result = hpcml(installed_builder, "jobscript", "cpu", "--site", "local", "--", "train.py", cwd=project)
    assert result.returncode == 0, result.stderr
    assert f"export SING_IMAGE={project}/images/cpu.sif\n" in result.stdout
    wrapper = installed_builder.parent.parent / "lib"  # the wheel's own wrapper, under site-packages
    line = result.stdout.rstrip().splitlines()[-1]
    assert line.startswith(f"srun --kill-on-bad-exit=1 {wrapper}/") and line.endswith(f" {project}/train.py"), line
    listed = hpcml(installed_builder, "list", cwd=project)
    assert listed.returncode == 0 and "  cpu " in listed.stdout, listed.stderr
    # a site's own tree, by the environment
    ours = shutil.copytree(RECIPES, tmp_path / "ours")
    (ours / "targets" / "ourcpu.yaml").write_text("description: Our CPU image\nextends: cpu\n")
    listed = hpcml(installed_builder, "list", cwd=project, env={"HPCML_RECIPES": ours})
    assert listed.returncode == 0 and "  ourcpu " in listed.stdout, listed.stderr


@pytest.mark.parametrize("name", ["singularity_wrapper", "apptainer_wrapper"])
def test_pip_install_puts_the_wrappers_on_path_with_their_site_settings(installed_builder, tmp_path, name):
    bin_dir = installed_builder.parent
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHONPATH", "SING_", "HPCML_"))}
    env = dict(clean, PATH=f"{bin_dir}:/usr/bin:/bin")
    shown = subprocess.run([name, "--help"], env=env, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "SING_IMAGE" in shown.stdout, shown.stderr
    # the site settings are found (a missing image is the next thing it checks)
    for site in ("local", "lumi"):
        result = subprocess.run(
            [name, "exec", "true"],
            capture_output=True,
            text=True,
            timeout=60,
            env=dict(env, HPCML_SITE=site, SING_IMAGE=str(tmp_path / "no.sif")),
        )
        assert result.returncode == 2, result.stderr
        assert result.stderr == f"error: singularity_wrapper: image not found: {tmp_path / 'no.sif'}\n"
