"""`jobscript` from a project folder (issue 47) and the paths it names (builder/run/job_paths.py):
the recipes it reads outside the checkout, the absolute paths its scripts name, the program (a
leading `python` dropped; no program, one that is not there or another python option refused at
once), every form of Slurm's --time, and Jean Zay's image folder (an image outside it, an unset
variable, a published module's image)."""

import json
import shutil
import subprocess

import pytest
from conftest import RECIPES
from helpers.cli_here import run_here
from helpers.job_scripts import WRAPPER, launch_line, make

from builder.run.jobscript import LAUNCHES


@pytest.fixture
def project(tmp_path):
    """A user's project folder, outside the checkout, with the program the job runs."""
    folder = tmp_path / "project"
    (folder / "src").mkdir(parents=True)
    (folder / "train.py").write_text("print('training')\n")
    (folder / "src" / "model.py").write_text("print('model')\n")
    return folder


def jobscript(*args, cwd, env=None, recipes=RECIPES):
    """`jobscript ARGS` in ``cwd``; the checkout's recipes named, unless ``recipes`` is None
    (the tests of which tree is read)."""
    return run_here("jobscript", *(("--recipes", recipes) if recipes else ()), *args, cwd=cwd, env=env)


def exported(text, name):
    return next(line.split("=", 1)[1] for line in text.splitlines() if line.startswith(f"export {name}="))


def one_line_error(result):
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    return result.stderr


# --- the recipes: --recipes, else HPCML_RECIPES, else ./recipes, else the installed ones ------


def test_outside_the_checkout_the_installed_recipes_serve_and_paths_are_absolute(project):
    result = jobscript("cpu", "--site", "local", "--", "train.py", "--epochs", "2", cwd=project, recipes=None)
    assert result.returncode == 0, result.stderr
    assert exported(result.stdout, "SING_IMAGE") == f"{project}/images/cpu.sif"
    assert launch_line(result.stdout).endswith(
        f"{WRAPPER} exec torchrun --standalone --nnodes=1 --nproc-per-node=1 {project}/train.py --epochs 2"
    )


def _own_tree(folder, description):
    recipes = shutil.copytree(RECIPES, folder)
    site = recipes / "sites" / "local.yaml"
    site.write_text(site.read_text().replace("description: ", f"description: {description} - ", 1))
    return recipes


def test_a_sites_own_tree_comes_from_the_environment_and_recipes_wins(project, tmp_path):
    ours = _own_tree(tmp_path / "ours", "Our tree")
    result = jobscript("cpu", "--", "train.py", cwd=project, env={"HPCML_RECIPES": ours}, recipes=None)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1].startswith("# cpu on local: Our tree - ")
    named = jobscript("cpu", "--", "train.py", cwd=project, env={"HPCML_RECIPES": ours})
    assert named.returncode == 0 and "Our tree" not in named.stdout, named.stderr


def test_a_recipes_folder_here_is_read_before_the_installed_one(project):
    _own_tree(project / "recipes", "This folder's")
    result = jobscript("cpu", "--", "train.py", cwd=project, recipes=None)
    assert result.returncode == 0, result.stderr
    assert "# cpu on local: This folder's - " in result.stdout


def test_a_recipe_tree_that_is_not_there_says_how_to_name_one(project):
    missing = project / "no-recipes"
    out = project / "job.sh"
    result = jobscript("cpu", "--out", out, "--", "train.py", cwd=project, env={"HPCML_RECIPES": missing}, recipes=None)
    assert one_line_error(result) == (
        f"error: {missing}: recipes directory not found; expected a directory holding sites/, targets/ "
        "and versions.yaml, named by --recipes DIR or HPCML_RECIPES\n"
    )
    assert not out.exists()
    # a command that reads no recipes does not trip on it
    verified = run_here("default", "--help", cwd=project, env={"HPCML_RECIPES": missing})
    assert verified.returncode == 0, verified.stderr


def test_doctor_names_the_recipes_it_reads_and_why(project):
    result = run_here("doctor", cwd=project)
    assert result.returncode == 0, result.stderr
    rows = dict(line.split(None, 1) for line in result.stdout.splitlines() if line.strip())
    assert rows["recipes"] == f"{RECIPES} (installed with the builder)"


# --- the program and the image, by their absolute paths -----------------------------------


@pytest.mark.parametrize(
    "program, runs",
    [
        (["src/model.py"], "{project}/src/model.py"),
        (["./train.py", "--lr", "0.1"], "{project}/train.py --lr 0.1"),
        (["../project/train.py"], "{project}/train.py"),
        (["python", "-u", "train.py"], "{project}/train.py"),
        # a module, or a bare name, may be in the image: the host cannot look
        (["-m", "smoke", "all"], "-m smoke all"),
        (["mytool", "--x"], "mytool --x"),
    ],
)
def test_the_program_is_named_by_its_absolute_path(project, program, runs):
    result = jobscript("cpu", "--launch", "srun", "--", *program, cwd=project)
    assert result.returncode == 0, result.stderr
    assert launch_line(result.stdout).endswith(" python " + runs.format(project=project))


@pytest.mark.parametrize("program", [["nonexist.py"], ["python", "src/nonexist.py", "--epochs", "2"], ["data/"]])
def test_a_program_that_is_not_there_is_refused_when_the_script_is_written(project, program):
    out = project / "job.sh"
    error = one_line_error(jobscript("cpu", "--out", out, "--", *program, cwd=project))
    name = program[1] if program[0] == "python" else program[0]
    assert error.startswith(f"error: command line: program {name}: no such file ({project}/{name.rstrip('/')}); ")
    assert "or -m MODULE for a module in the image" in error and not out.exists()


def test_no_program_is_a_one_line_error():
    result = run_here("jobscript", "cpu")
    assert result.returncode == 2 and "no program: give it after --" in result.stderr


@pytest.mark.parametrize("launch", LAUNCHES)
@pytest.mark.parametrize("typed", [("python",), ("python3",), ("python3.12",), ("python", "-u")])
def test_a_leading_python_is_dropped_with_a_note_in_every_launch_mode(tree, typed, launch):
    # `-- python train.py` is what most users type; every launch starts python itself
    site = "local" if launch in ("torchrun", "srun", "mpirun") else "lumi"
    target = "cpu" if site == "local" else "lumi-rocm"
    plain, expected = make(tree, target, site=site, launch=launch)
    plan, text = make(tree, target, site=site, launch=launch, program=(*typed, "train.py", "--epochs", "10"))
    assert launch_line(text) == launch_line(expected)
    assert plan.notes == (f"dropped {' '.join(typed)!r} after --: each launch starts python itself",)
    assert plain.notes == ()


def test_a_leading_python_before_a_module_keeps_the_module(tree):
    plan, text = make(tree, "cpu", launch="srun", program=("python", "-m", "smoke", "all"))
    assert launch_line(text).endswith("python -m launchenv -- python -m smoke all")


def test_the_note_reaches_stderr_and_the_script_stays_clean(project):
    result = run_here("jobscript", "cpu", "--", "python", "train.py", cwd=project)
    assert result.returncode == 0, result.stderr
    assert "note: dropped 'python' after --: each launch starts python itself" in result.stderr
    assert "python python" not in result.stdout and "torchrun" in result.stdout


def test_another_python_option_first_is_refused_in_one_line():
    result = run_here("jobscript", "cpu", "--", "python", "-O", "train.py")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "python option -O after --: the job starts python itself" in result.stderr


def test_the_image_is_named_by_its_absolute_path_unless_it_starts_with_a_variable(project):
    result = jobscript("cpu", "--image", "sifs/mine.sif", "--", "train.py", cwd=project)
    assert exported(result.stdout, "SING_IMAGE") == f"{project}/sifs/mine.sif"
    result = jobscript("cpu", "--image", "$WORK/sifs/mine.sif", "--", "train.py", cwd=project)
    assert exported(result.stdout, "SING_IMAGE") == '"${WORK}"/sifs/mine.sif'


def test_bound_and_staged_data_are_named_from_the_project_folder(project):
    args = ("--bind", "data", "--bind", "/gpfs/x:/x:ro", "--bind", "$SCRATCH/d", "--stage", "shards")
    result = jobscript("cpu", *args, "--", "train.py", cwd=project)
    assert result.returncode == 0, result.stderr
    assert exported(result.stdout, "SING_BIND") == f"'{project}/data,/gpfs/x:/x:ro,$SCRATCH/d'"
    assert exported(result.stdout, "SING_STAGE") == f"{project}/shards"


def run_prelude(text, folder, env):
    """The script up to its launch lines in bash, with a `module` that does nothing."""
    script = folder / "prelude.sh"
    script.write_text(text[: text.rindex("\n\n")] + "\n")
    return subprocess.run(
        ["bash", "-c", 'module() { :; }; export -f module; exec bash "$0"', str(script)],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=folder,
        env={"PATH": "/usr/bin:/bin", **env},
    )


def test_a_missing_image_on_a_site_says_what_puts_it_there_not_make(project):
    result = jobscript("a100-cuda", "--site", "karolina", "--account", "OPEN-00-00", "--", "train.py", cwd=project)
    assert result.returncode == 0, result.stderr
    assert "make build" not in result.stdout
    ran = run_prelude(result.stdout, project, {})
    assert ran.returncode == 2
    assert ran.stderr == (
        f"error: no image at '{project}/images/a100-cuda.sif' (copy the a100-cuda image there first, made by: "
        "python -m builder build a100-cuda; or write the script again with jobscript --image PATH)\n"
    )


# --- Jean Zay: images only from its image folder, the folder's variable, a published module's image


def test_an_unset_image_folder_variable_is_the_scripts_own_one_line_error(project):
    result = jobscript("h100-cuda", "--", "train.py", cwd=project)
    assert result.returncode == 0, result.stderr
    ran = run_prelude(result.stdout, project, {})
    assert ran.returncode == 2 and "unbound variable" not in ran.stderr
    assert ran.stderr == (
        "error: SINGULARITY_ALLOWED_DIR is not set, and the image h100-cuda.sif is looked for in that "
        "folder; submit the job from a login shell of jean-zay-h100\n"
    )
    allowed = project / "allowed"
    allowed.mkdir()
    (allowed / "h100-cuda.sif").write_bytes(b"image")
    ran = run_prelude(result.stdout, project, {"SINGULARITY_ALLOWED_DIR": str(allowed)})
    assert ran.returncode == 0, ran.stderr


@pytest.mark.parametrize("image", ["images/a100-cuda.sif", "/scratch/me/a100-cuda.sif"])
def test_an_image_outside_the_allowed_folder_is_refused_in_one_line(project, image):
    result = run_here(
        "jobscript",
        "a100-cuda",
        "--site",
        "jean-zay",
        "--image",
        image,
        "--",
        "train.py",
        env={"SINGULARITY_ALLOWED_DIR": "/gpfs/allowed"},
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        f"error: command line: --image {image}: jean-zay runs images only from "
        "$SINGULARITY_ALLOWED_DIR; copy it there (idrcontmgr cp IMAGE) and give "
        "--image '$SINGULARITY_ALLOWED_DIR/NAME.sif'\n"
    )
    # the folder as the login node names it is the same folder
    expanded = run_here(
        "jobscript",
        "a100-cuda",
        "--site",
        "jean-zay",
        "--image",
        "/gpfs/allowed/x.sif",
        "--",
        "train.py",
        env={"SINGULARITY_ALLOWED_DIR": "/gpfs/allowed"},
        cwd=project,
    )
    assert expanded.returncode == 0, expanded.stderr


def published(prefix):
    """A version as publish leaves it for jean-zay-h100: its record beside image.sif."""
    version = prefix / "pytorch" / "2.13-h100"
    version.mkdir(parents=True)
    record = {"name": "pytorch", "version": "2.13-h100", "target": "h100-cuda", "site": "jean-zay-h100"}
    (version / "publish.json").write_text(json.dumps(record))
    (version / "image.sif").write_bytes(b"image")
    return version


def test_a_published_image_outside_the_allowed_folder_is_refused_as_an_image_is(project, tmp_path):
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    version = published(tmp_path / "appl")
    env = {"SINGULARITY_ALLOWED_DIR": str(allowed)}
    error = one_line_error(jobscript("h100-cuda", "--published", version, "--", "train.py", cwd=project, env=env))
    assert error == (
        f"error: command line: --published {version} (image {version}/image.sif): jean-zay-h100 runs images "
        "only from $SINGULARITY_ALLOWED_DIR; copy it there (idrcontmgr cp IMAGE) and give "
        "--image '$SINGULARITY_ALLOWED_DIR/NAME.sif'\n"
    )
    # as it says: the module's wrapper, the image copied into the folder
    fixed = jobscript(
        "h100-cuda",
        "--published",
        version,
        "--image",
        "$SINGULARITY_ALLOWED_DIR/pytorch.sif",
        "--",
        "train.py",
        cwd=project,
        env=env,
    )
    assert fixed.returncode == 0, fixed.stderr
    assert exported(fixed.stdout, "SING_IMAGE") == '"${SINGULARITY_ALLOWED_DIR}"/pytorch.sif'
    inside = published(allowed / "modules")
    assert jobscript("h100-cuda", "--published", inside, "--", "train.py", cwd=project, env=env).returncode == 0


# --- every form of sbatch's --time ---------------------------------------------------------


@pytest.mark.parametrize(
    "time, expected",
    [
        ("30", 30 * 60),  # minutes
        ("90:30", 90 * 60 + 30),  # minutes:seconds
        ("2:00:00", 2 * 3600),  # hours:minutes:seconds
        ("1-12", 36 * 3600),  # days-hours
        ("1-12:30", 36 * 3600 + 30 * 60),  # days-hours:minutes
        ("1-12:30:15", 36 * 3600 + 30 * 60 + 15),  # days-hours:minutes:seconds
        ("0:00:30", 30),
    ],
)
def test_every_form_of_sbatchs_time_is_read(project, time, expected):
    from builder.run.job_request import seconds

    assert seconds(time) == expected
    result = jobscript("cpu", "--time", time, "--", "train.py", cwd=project)
    assert result.returncode == 0, result.stderr
    assert f"#SBATCH --time={time}\n" in result.stdout  # as the user wrote it


@pytest.mark.parametrize(
    "time, message",
    [
        ("soon", "--time 'soon': expected a Slurm time (minutes, minutes:seconds, hours:minutes:seconds, "),
        ("1:2:3:4", "--time '1:2:3:4': expected a Slurm time"),
        ("1-", "--time '1-': expected a Slurm time"),
        ("1.5", "--time '1.5': expected a Slurm time"),
        ("2h", "--time '2h': expected a Slurm time"),
        ("-1", "--time '-1': expected a Slurm time"),
        # no limit: it fits no partition's, and there is nothing to choose one by
        ("0", "--time 0: no time limit; a job needs one"),
        ("00:00:00", "--time 00:00:00: no time limit"),
        ("UNLIMITED", "--time UNLIMITED: no time limit"),
        ("infinite", "--time infinite: no time limit"),
    ],
)
def test_a_time_slurm_would_not_read_as_a_limit_is_one_line(project, time, message):
    error = one_line_error(jobscript("cpu", "--time", time, "--", "train.py", cwd=project))
    assert message in error


def test_a_time_in_minutes_or_days_is_held_to_the_limits_as_a_clock_is(project):
    """Jean Zay's qos_gpu-dev takes 2 h: 150 minutes are too many, 119:59 fit; a day and a
    half needs t4 (up to 100 h), not t3 (20 h)."""
    site = ("v100-cuda", "--site", "jean-zay-v100")
    error = one_line_error(jobscript(*site, "--qos", "qos_gpu-dev", "--time", "150", "--", "train.py", cwd=project))
    assert "--qos qos_gpu-dev does not fit this job (--time 150 (2:30:00) > 02:00:00)" in error
    fits = jobscript(*site, "--qos", "qos_gpu-dev", "--time", "119:59", "--", "train.py", cwd=project)
    assert fits.returncode == 0, fits.stderr
    longer = jobscript(*site, "--time", "1-12", "--", "train.py", cwd=project)
    assert "#SBATCH --qos=qos_gpu-t4\n" in longer.stdout, longer.stderr


@pytest.mark.parametrize(
    "time, valid", [("90", True), ("1-12", True), ("45:30", True), ("0", False), ("UNLIMITED", False)]
)
def test_a_site_file_takes_the_same_forms(tmp_path, project, time, valid):
    recipes = shutil.copytree(RECIPES, tmp_path / "recipes")
    with open(recipes / "sites" / "local.yaml", "a") as site:
        site.write(f'slurm:\n  time: "{time}"\n')
    result = jobscript("cpu", "--", "train.py", cwd=project, recipes=recipes)
    if valid:
        assert result.returncode == 0 and f"#SBATCH --time={time}\n" in result.stdout, result.stderr
    else:
        assert f"local.yaml:{len((recipes / 'sites' / 'local.yaml').read_text().splitlines())}: slurm.time" in (
            one_line_error(result)
        )


# --- a project env (--pyenv): SING_PYENV by its absolute path, for the target's image alone ---


def env_file(folder, target):
    """A squashfs holding an env's record, as hpcml env build leaves one (mksquashfs: make setup-test)."""
    content = folder / f"{target}-env"
    content.mkdir()
    (content / "hpcml-pyenv.json").write_text(json.dumps({"target": target, "python": "3.11"}))
    out = folder / f"requirements.{target}.sqsh"
    subprocess.run(["mksquashfs", content, out, "-noappend", "-quiet", "-no-progress"], check=True)
    return out


def test_pyenv_is_exported_by_its_absolute_path_and_checked_when_the_job_starts(project, tmp_path):
    env_file(project, "cpu")
    result = jobscript("cpu", "--pyenv", "requirements.cpu.sqsh", "--", "train.py", cwd=project)
    assert result.returncode == 0, result.stderr
    assert exported(result.stdout, "SING_PYENV") == f"{project}/requirements.cpu.sqsh"
    assert f"SING_PYENV: your project env {project}/requirements.cpu.sqsh (--pyenv)" in result.stdout
    assert 'if [ ! -f "${SING_PYENV:-}" ]; then' in result.stdout
    assert "--pyenv requirements.cpu.sqsh" in result.stdout.splitlines()[2]  # the command that wrote it
    script = tmp_path / "job.sh"
    script.write_text(result.stdout)
    checked = subprocess.run(["shellcheck", "--severity=style", script], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout


def test_an_env_built_for_another_image_is_refused_in_one_line(project):
    env_file(project, "a100-cuda")
    result = jobscript("cpu", "--pyenv", "requirements.a100-cuda.sqsh", "--", "train.py", cwd=project)
    assert one_line_error(result) == (
        f"error: command line: --pyenv {project}/requirements.a100-cuda.sqsh: an env built for image a100-cuda, "
        "not cpu; build one for cpu with: hpcml env lock cpu REQUIREMENTS, then hpcml env build\n"
    )


def test_a_pyenv_that_is_no_env_file_is_one_line(project):
    (project / "requirements.txt").write_text("rich\n")
    result = jobscript("cpu", "--pyenv", "requirements.txt", "--", "train.py", cwd=project)
    assert "requirements.txt: not an env file (no squashfs header)" in one_line_error(result)
