"""Property tests of the job script writer (builder/run/jobscript.py, job.sh.j2): any text a
user gives in an option or an argument is either refused in one line, or lands in a script
whose #SBATCH options, read as sbatch reads them (helpers/sbatch_reader.py), are exactly those
the plan asked for, and from which bash gets the value back unchanged.

NUL is left out of the generated text: neither a command line nor an environment can carry it;
so are surrogates, but those a command line's non-UTF-8 bytes become.
"""

import os
import stat
import subprocess

import pytest
from helpers import awkward_text
from helpers.property_share import examples
from helpers.sbatch_reader import Unreadable, options
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from builder.errors import RecipeError
from builder.run import jobscript
from builder.run.jobscript import Request


def from_a_command_line(value: str) -> str:
    """``value`` as a command line can carry it: no NUL, and of the surrogates only those that
    Python makes of bytes that are not UTF-8 (U+DC80 to U+DCFF); the others become one."""
    return "".join(
        "\udcff" if c == "\x00" or ("\ud800" <= c <= "\udfff" and not "\udc80" <= c <= "\udcff") else c for c in value
    )


# The writers' awkward text (helpers/awkward_text.py), as a command line can carry it
TEXT = awkward_text.text.map(from_a_command_line)
# Every option the writer may write; anything else in a script is an injection
WRITTEN = {
    "job-name", "account", "partition", "nodes", "ntasks-per-node", "cpus-per-task", "gres",
    "gpus-per-node", "mem", "qos", "constraint", "hint", "exclusive", "bb", "time", "open-mode",
}  # fmt: skip
SITES = {"cpu": "local", "lumi-rocm": "lumi", "a100-cuda": "jean-zay", "gh200-cuda": "roihu"}
PROPERTY = settings(
    max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def planned(tree, target, **asked):
    asked.setdefault("program", ("train.py",))
    site = asked.setdefault("site", SITES[target])
    if tree.sites[site].slurm.account and tree.sites[site].slurm.account.required:
        asked.setdefault("account", tree.sites[site].slurm.account.example)
    return jobscript.plan(tree, target, Request(**asked))


def assert_one_line_refusal(error: RecipeError):
    message = str(error)
    assert message.isprintable(), message  # no newline, carriage return or other control
    assert error.exit_status == 2


def assert_directives_as_planned(plan, text):
    try:
        read = options(text)
    except Unreadable as error:  # sbatch would stop on the script
        raise AssertionError(f"sbatch cannot read the script's options: {error}") from None
    assert read == [f"--{option}={value}" if value else f"--{option}" for option, value in plan.sbatch]
    written = {word[2:].split("=", 1)[0] for word in read}
    assert written <= WRITTEN, written - WRITTEN


@pytest.mark.parametrize("target", sorted(SITES))
@PROPERTY
@given(field=st.sampled_from(["account", "partition", "qos", "time", "nvme_pool"]), value=TEXT)
@example(field="account", value="x\n#SBATCH --uid=0")
@example(field="account", value="x --uid=0")
@example(field="account", value='x" --uid=0 "')
@example(field="qos", value="x\n#SBATCH --uid=0")
@example(field="time", value="30\n#SBATCH --uid=0")
@example(field="nvme_pool", value="100G\r#SBATCH --uid=0")
def test_a_slurm_field_is_refused_in_one_line_or_written_as_the_only_change(tree, target, field, value):
    try:
        plan = planned(tree, target, **{field: value})
        text = jobscript.script(plan)
    except RecipeError as error:
        assert_one_line_refusal(error)
        return
    assert_directives_as_planned(plan, text)
    if field == "account" and value:  # none given: none written
        assert f"--account={value}" in options(text)


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory):
    """A folder with an `srun` that keeps each call's arguments and the image's variables."""
    folder = tmp_path_factory.mktemp("bin")
    srun = folder / "srun"
    srun.write_text(
        "#!/bin/bash\n"
        'call="$(mktemp "$CALLS/call.XXXXXX")"\n'
        'printf "%s\\0" "$SING_IMAGE" "$SING_BIND" "$SING_STAGE" "${SING_PYENV:-}" "$@" > "$call"\n'
    )
    srun.chmod(0o755)
    return folder


def run_script(text, folder, stand_ins):
    """The script in bash with `srun` stood in for; the launch's arguments and variables."""
    calls = folder / "calls"
    calls.mkdir()
    script = folder / "job.sh"
    script.write_bytes(text.encode(errors="surrogateescape"))
    ran = subprocess.run(
        ["bash", str(script)],
        capture_output=True,
        timeout=30,
        cwd=folder,
        stdin=subprocess.DEVNULL,
        env={
            "PATH": f"{stand_ins}:/usr/bin:/bin",
            "CALLS": str(calls),
            "HOME": str(folder),
            **{"SLURM_JOB_NUM_NODES": "1", "SLURM_JOB_NODELIST": "node1", "SLURM_JOB_ID": "1"},
        },
    )
    assert ran.returncode == 0, ran.stderr.decode(errors="replace")
    launches = [path.read_bytes() for path in calls.iterdir()]
    launch = next(call for call in launches if b"\0torchrun\0" in call)
    return [word.decode("utf-8", "surrogateescape") for word in launch.split(b"\0")[:-1]]


def file_name(text):
    """``text`` as one file name: no slash, not . or .."""
    name = text.replace("/", "_")
    return name if name not in ("", ".", "..") else f"x{name}"


@PROPERTY
@given(bind=TEXT, stage=TEXT, image=TEXT, wrapper=TEXT, args=st.lists(TEXT, max_size=3))
@example(
    bind="/a\n#SBATCH --uid=0",
    stage="b'\n#SBATCH --gid=0",
    image="x\n#SBATCH --uid=0",
    wrapper="$(id)\n#SBATCH",
    args=["x\n#SBATCH --uid=0", "$(id)", "'"],
)
def test_paths_and_arguments_come_back_unchanged_and_add_no_directive(
    tree, tmp_path_factory, stand_ins, bind, stage, image, wrapper, args
):
    folder = tmp_path_factory.mktemp("job")
    image_path = str(folder / f"image-{file_name(image)}")
    wrapper_path = str(folder / f"wrapper-{file_name(wrapper)}")
    asked = dict(binds=(bind,), stage=(stage,), image=image_path, wrapper=wrapper_path, program=("train.py", *args))
    try:
        plan = planned(tree, "cpu", **asked)
        text = jobscript.script(plan)
    except RecipeError as error:
        assert_one_line_refusal(error)
        return
    plain = jobscript.script(planned(tree, "cpu", binds=("/b",), stage=("/s",), image="/i.sif", wrapper="w"))
    assert options(text) == options(plain)
    assert_directives_as_planned(plan, text)
    # the image and the wrapper exist once the script is written, so the job's checks pass
    with open(image_path, "w"):
        pass
    with open(wrapper_path, "w"):
        pass
    os.chmod(wrapper_path, stat.S_IRWXU)
    launch = run_script(text, folder, stand_ins)
    assert launch[:3] == [image_path, bind, stage]
    assert wrapper_path in launch
    assert launch[-len(args) - 1 :] == ["train.py", *args]


@pytest.fixture(scope="module")
def env_file(tmp_path_factory):
    """A project env's file for the cpu image, as `hpcml env build` leaves one (its record)."""
    folder = tmp_path_factory.mktemp("env")
    (folder / "content").mkdir()
    (folder / "content" / "hpcml-pyenv.json").write_text('{"target": "cpu"}')
    subprocess.run(["mksquashfs", folder / "content", folder / "env.sqsh", "-quiet", "-no-progress"], check=True)
    return folder / "env.sqsh"


@PROPERTY
@given(name=TEXT)
@example(name="x\n#SBATCH --uid=0")
@example(name="$(id)'")
def test_a_project_envs_path_comes_back_unchanged_and_adds_no_directive(
    tree, tmp_path_factory, stand_ins, env_file, name
):
    folder = tmp_path_factory.mktemp("job")
    pyenv = folder / f"env-{file_name(name)}"
    pyenv.write_bytes(env_file.read_bytes())
    image = folder / "cpu.sif"
    try:
        plan = planned(tree, "cpu", image=str(image), wrapper="true", pyenv=str(pyenv))
        text = jobscript.script(plan)
    except RecipeError as error:
        assert_one_line_refusal(error)
        return
    assert options(text) == options(jobscript.script(planned(tree, "cpu", image=str(image), wrapper="true")))
    image.touch()
    assert run_script(text, folder, stand_ins)[3] == str(pyenv)


def test_the_property_finds_the_old_header_comment(tree, monkeypatch):
    """Before: the header echoed the command line as shell words, and a newline in a quoted
    value ended the comment, so sbatch read the next line as a directive."""
    from builder.render.templating import templates

    monkeypatch.setitem(templates.filters, "comment", str)
    templates.cache.clear()
    try:
        plan = planned(tree, "cpu", program=("train.py", "x\n#SBATCH --uid=0"))
        with pytest.raises(AssertionError):
            assert_directives_as_planned(plan, jobscript.script(plan))
    finally:
        templates.cache.clear()


def test_the_property_finds_an_account_taken_as_typed(tree, monkeypatch):
    """Before: a site without an account pattern took the account as typed."""
    from builder.run import job_placement

    monkeypatch.setattr(job_placement, "field", lambda value, *args, **kwargs: value)
    monkeypatch.setattr(job_placement, "single_line", lambda value, *args, **kwargs: value)
    monkeypatch.setattr(jobscript, "directive", lambda option, value, where: f"#SBATCH --{option}={value}")
    plan = planned(tree, "cpu", account="x\n#SBATCH --uid=0")
    with pytest.raises(AssertionError):
        assert_directives_as_planned(plan, jobscript.script(plan))


INJECTED = "x\n#SBATCH --uid=0"


@pytest.mark.parametrize(
    "asked, shown",
    [
        (["--account", INJECTED], "--account 'x\\n#SBATCH --uid=0': expected one line"),
        (["--account", "x --uid=0"], "--account 'x --uid=0': expected a Slurm account"),
        (["--qos", INJECTED], "--qos 'x\\n#SBATCH --uid=0': not a QoS of local"),
        (["--partition", INJECTED], "--partition 'x\\n#SBATCH --uid=0': not a partition of local"),
        (["--time", INJECTED], "--time 'x\\n#SBATCH --uid=0': expected a Slurm time"),
        (["--nvme-pool", INJECTED], "--nvme-pool 'x\\n#SBATCH --uid=0': local has no NVMe pool"),
        ([f"--{INJECTED}"], "unrecognized arguments: --x\\n#SBATCH --uid=0"),
    ],
    ids=["account", "account-words", "qos", "partition", "time", "nvme-pool", "option"],
)
def test_the_cli_refuses_a_directive_in_one_line_and_writes_nothing(tmp_path, asked, shown):
    # main() in this interpreter: a fresh one says the same (tests/builder/test_cli_here.py)
    from helpers.cli_here import run_here

    out = tmp_path / "job.sh"
    ran = run_here("jobscript", "cpu", "--site", "local", *asked, "--out", out, "--", "train.py")
    assert ran.returncode == 2, ran.stderr
    assert ran.stderr.count("\n") == 1 and ran.stderr.startswith("error: ") and shown in ran.stderr, ran.stderr
    assert not out.exists()


def test_the_cli_writes_quoted_paths_and_arguments_with_the_directives_asked_for(tmp_path):
    from conftest import run_builder

    out = tmp_path / "job.sh"
    (tmp_path / "train.py").write_text("")
    ran = run_builder(
        "jobscript", "cpu", "--site", "local", "--bind", INJECTED, "--stage", INJECTED, "--image", f"/{INJECTED}",
        "--account", "project_1", "--out", out, "--", "train.py", INJECTED, "\udcff", cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    text = out.read_bytes().decode(errors="surrogateescape")
    assert "--uid=0" not in " ".join(options(text))
    assert [word for word in options(text) if word.startswith("--account")] == ["--account=project_1"]
    assert subprocess.run(["bash", "-n", str(out)], timeout=30).returncode == 0
    assert b"/train.py 'x\n#SBATCH --uid=0' '\xff'\n" in out.read_bytes()  # the bytes as typed
