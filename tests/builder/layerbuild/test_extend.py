"""`hpcml extend`: a Dockerfile's steps as one more layer on a built image. With the fake
runner: what is built from what, when it is up to date, and the mistakes; then for real on
the CPU image with Apptainer: pip reaches the host's sources (a wheel folder of the test's,
helpers/pip_sources.py), and a step that replaces one of the image's distributions fails the
build in one line."""

import subprocess

import pytest
from conftest import recipe_tree, run_builder
from helpers.fake_runner import FakeRunner
from helpers.pip_sources import serve, wheel

from builder.errors import RecipeError
from builder.host import build_route
from builder.host.images import Built
from builder.host.progress import Progress
from builder.layerbuild import extend, layers
from builder.render.extension import BASE_PINS, plan_extension

TREE = recipe_tree()
DOCKERFILE = """\
FROM ignored
ENV HPCML_EXTRA=added
RUN echo "made in the extra layer" > /opt/made.txt
RUN pip install --no-deps alpha==1.0
COPY greet.py /opt/project/
CMD ["python", "/opt/project/greet.py"]
"""
GREET = "import os, torch, alpha\nprint(os.environ['HPCML_EXTRA'], torch.__version__, alpha.__name__)\n"


def extended(images, dockerfile, name):
    target = TREE.target("cpu")
    built = Built(target, target.sites[0], images / "cpu.sif")
    plan = plan_extension(TREE, target, dockerfile, name)
    return extend.build_extension(built, plan, images=images, progress=Progress())


def project(folder):
    folder.mkdir(exist_ok=True)
    (folder / "greet.py").write_text(GREET)
    (folder / "Dockerfile").write_text(DOCKERFILE)
    return folder / "Dockerfile"


@pytest.fixture
def fake(monkeypatch, tmp_path):
    monkeypatch.setattr(extend, "find_apptainer", lambda site, progress, images: ("apptainer", "apptainer (fake)"))
    monkeypatch.setattr(build_route, "check", lambda site=None, target=None: build_route.Root("as root"))
    monkeypatch.setattr(
        layers.host_settings,
        "write",
        lambda host, indexes, progress, offline=False, apt_mirrors=(): host.mkdir(parents=True),
    )
    images = tmp_path / "images"
    images.mkdir()
    (images / "cpu.sif").write_text("the cpu image")
    return FakeRunner(monkeypatch), images


def test_the_layer_builds_on_the_image_by_name_and_is_up_to_date_until_a_file_changes(fake, tmp_path, capsys):
    runner, images = fake
    dockerfile = project(tmp_path / "project")
    made = extended(images, dockerfile, "cpu-project")
    assert made == images / "cpu-project.sif" and made.is_file()
    (build,) = runner.builds
    assert build.build_args == {"BASE": "cpu.sif"} and runner.packings[0].compressed
    assert "cpu-project.context/greet.py /opt/project/" in build.definition
    assert (images / "cpu-project.def").read_text() == build.definition  # beside it, for the user to read
    assert not (images / "cpu-project.context").exists()  # the staged copies are gone
    runner.builds.clear()
    extended(images, dockerfile, "cpu-project")
    assert runner.builds == [] and f"{made} is up to date" in capsys.readouterr().out
    (tmp_path / "project" / "greet.py").write_text(GREET + "# changed\n")
    extended(images, dockerfile, "cpu-project")
    assert len(runner.builds) == 1


@pytest.mark.parametrize(
    "name, message",
    [("cpu", "--name 'cpu': expected a new image name"), ("a b", "--name 'a b'"), ("puhti-cuda", "not a target's")],
)
def test_a_name_that_would_replace_a_targets_image_is_refused(fake, tmp_path, name, message):
    _, images = fake
    with pytest.raises(RecipeError, match=message):
        extended(images, project(tmp_path / "p"), name)
    assert sorted(p.name for p in images.iterdir()) == ["cpu.sif"]


def test_without_the_image_built_it_is_one_line_and_exit_2(tmp_path):
    result = run_builder("extend", "cpu", project(tmp_path / "p"), "--images", tmp_path / "images")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "cpu.sif: no image; build it first with" in result.stderr
    assert not (tmp_path / "images").exists()


def test_the_steps_read_the_hosts_pip_settings_and_are_followed_by_the_pin_guard(tmp_path):
    lines = plan_extension(TREE, TREE.target("cpu"), project(tmp_path / "p"), "cpu-x").plan.text.splitlines()
    settings = lines.index("if [ -r /mnt/hpcml-build-host.sh ]; then . /mnt/hpcml-build-host.sh; fi")
    freeze = next(i for i, line in enumerate(lines) if line.endswith(f"> {BASE_PINS}"))
    guard = next(i for i, line in enumerate(lines) if "smoke.pins" in line)
    assert settings < freeze < guard < lines.index("%test")


@pytest.fixture
def sources(tmp_path, monkeypatch):
    yield from serve(tmp_path, monkeypatch)


def test_the_extended_image_runs_the_steps_with_the_stack_of_the_image(cpu_image, apptainer, sources, tmp_path):
    wheel(sources, "alpha", "1.0")  # from the host pip's wheel folder, bound for %post
    dockerfile = project(tmp_path / "project")
    result = run_builder(
        "extend",
        "cpu",
        dockerfile,
        "--name",
        "cpu-extra",
        "--images",
        cpu_image.parent,
        timeout=900,
        env={"HPCML_APPTAINER": apptainer},
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    image = cpu_image.parent / "cpu-extra.sif"
    ran = subprocess.run([apptainer, "run", str(image)], capture_output=True, text=True, timeout=300)
    assert ran.stdout.split() == ["added", "2.13.0+cpu", "alpha"], ran.stderr
    made = subprocess.run([apptainer, "exec", str(image), "cat", "/opt/made.txt"], capture_output=True, text=True)
    assert made.stdout == "made in the extra layer\n"
    labels = subprocess.run([apptainer, "inspect", "--labels", str(image)], capture_output=True, text=True).stdout
    assert "org.hpc-ml-containers.extended.from: cpu" in labels


def test_a_step_that_replaces_an_image_distribution_fails_the_build_in_one_line(
    cpu_image, apptainer, sources, tmp_path
):
    wheel(sources, "numpy", "1.0")  # a stand-in numpy, pip's to take from the host's wheel folder
    folder = tmp_path / "old"
    folder.mkdir()
    (folder / "Dockerfile").write_text("FROM x\nRUN pip install --no-deps numpy==1.0\n")
    result = run_builder(
        "extend", "cpu", folder / "Dockerfile", "--name", "cpu-old", "--images", cpu_image.parent, timeout=900,
        env={"HPCML_APPTAINER": apptainer},
    )  # fmt: skip
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 1 and len(errors) == 1, result.stderr[-3000:]
    pins = {p.name: p.version for step in TREE.target("cpu").python_lock.steps for p in step.pins}
    assert errors[0].startswith(
        f"error: the steps of Dockerfile replaced the image's numpy {pins['numpy']} with 1.0; an image's pins stay: "
        "add packages it lacks, or use hpcml env; the previous image, if any, is unchanged; log: "
    )
    assert not (cpu_image.parent / "cpu-old.sif").exists()


def test_a_baked_env_is_copied_as_a_tar_unpacked_at_its_mount_and_read_by_every_python(tmp_path):
    plan = plan_extension(TREE, TREE.target("cpu"), None, "cpu-env", pyenv=tmp_path / "env.cpu.sqsh").plan
    lines = plan.text.splitlines()
    assert "cpu-env.context/pyenv.tar /pyenv.tar" in lines
    assert "tar -xf /pyenv.tar -C /opt/pyenv" in lines
    assert any(line.startswith("/opt/venv/bin/python -c ") and "hpcml-pyenv.pth" in line for line in lines)
    assert "export PATH=/opt/pyenv/bin:$PATH" in lines
    assert "--- extend: the steps of env.cpu.sqsh" in plan.text


def test_extend_needs_a_dockerfile_or_an_env(tmp_path):
    result = run_builder("extend", "cpu", "--images", tmp_path)
    assert result.returncode == 2 and result.stderr == (
        "error: command line: expected a Dockerfile, --pyenv LOCK, or both\n"
    )


@pytest.mark.full
def test_an_env_baked_into_an_image_is_imported_with_no_bind(cpu_image, apptainer, sources, tmp_path):
    wheel(sources, "alpha", "1.0")
    (tmp_path / "requirements.txt").write_text("alpha\n")
    assert run_builder("env", "lock", "cpu", tmp_path / "requirements.txt").returncode == 0
    result = run_builder(
        "extend", "cpu", "--pyenv", tmp_path / "requirements.cpu.lock", "--name", "cpu-alpha",
        "--images", cpu_image.parent, timeout=900, env={"HPCML_APPTAINER": apptainer},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    image = str(cpu_image.parent / "cpu-alpha.sif")
    for python in ("python", "/opt/venv/bin/python"):
        ran = subprocess.run([apptainer, "exec", image, python, "-c", "import alpha"], capture_output=True, text=True)
        assert (ran.returncode, ran.stderr) == (0, ""), python
