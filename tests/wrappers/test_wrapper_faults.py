"""singularity_wrapper when things go wrong, with real faults: node-local disks too small for a
staged copy (tmpfs mounts of a few MiB), two tasks of one job waiting for one copy, the
removal of ended jobs' copies (a real Slurm), and settings that are wrong. Each fault stops
the run with one line and status 2 before the runtime starts, and leaves no half copy.

Most tests run a stand-in runtime that records its arguments: what matters is whether it ran
and what it was asked to bind. One test runs the real one with the CPU image."""

import contextlib
import fcntl
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from conftest import ROOT, SIF_HEADER, flocks, wait_until
from conftest import tmpfs as small_disk  # the fixture below is named tmpfs
from helpers.slurm_jobs import wait_for

WRAPPER = ROOT / "wrappers" / "singularity_wrapper"
PREFIX = "error: singularity_wrapper: "
NEEDS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
SPACE = re.compile(r"(\d+) KiB needed \(du -sk\), (\d+) KiB free \(df -Pk\)")


@pytest.fixture
def env(tmp_path):
    """A clean environment (none of the caller's Slurm or wrapper settings) whose runtime is
    a recorder: each run leaves runs/run.<pid> (its arguments, one a line) and
    runs/inodes.<pid> (the inode of each folder it was asked to bind)."""
    runs = tmp_path / "runs"
    runs.mkdir()
    recorder = tmp_path / "apptainer"
    recorder.write_text(
        "#!/bin/sh\n"
        f"runs={shlex.quote(str(runs))}\n"
        'printf "%s\\n" "$@" > "$runs/run.$$"\n'
        "previous=\n"
        'for arg in "$@"; do\n'
        '    [ "$previous" = --bind ] && stat -c "%i %n" "${arg%%:*}" >> "$runs/inodes.$$"\n'
        '    previous="$arg"\n'
        "done\n"
        "exit 0\n"
    )
    recorder.chmod(0o755)
    image = tmp_path / "image.sif"
    image.write_bytes(SIF_HEADER)
    scratch = tmp_path / "tmpdir"
    scratch.mkdir()
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SING_", "HPCML_"))}
    return dict(clean, SING_IMAGE=str(image), HPCML_APPTAINER=str(recorder), HPCML_SITE="local", TMPDIR=str(scratch))


def runs(tmp_path):
    """The argument lists the recorder got, one per run."""
    return [p.read_text().splitlines() for p in sorted((tmp_path / "runs").glob("run.*"))]


def bound(argv):
    return [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == "--bind"]


@pytest.fixture
def tmpfs(tmp_path):
    """Mounts a tmpfs with the given options (a small node-local disk); unmounted afterwards."""
    with contextlib.ExitStack() as mounts:
        yield lambda name, options: mounts.enter_context(small_disk(tmp_path / name, options))


def dataset(path, sizes):
    path.mkdir()
    for number, size in enumerate(sizes):
        (path / f"shard-{number}.bin").write_bytes(os.urandom(size))
    return path


def wrap(*args, env, timeout=60):
    return subprocess.run([str(WRAPPER), *map(str, args)], env=env, capture_output=True, text=True, timeout=timeout)


def start(*args, env):
    return subprocess.Popen(
        [str(WRAPPER), *map(str, args)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def one_line_error(returncode, stderr, message):
    """The wrapper's way to stop: status 2 and one line naming the fault; returns the line."""
    assert returncode == 2, stderr
    assert stderr.count("\n") == 1 and stderr.startswith(PREFIX), stderr
    assert message in stderr and "Traceback" not in stderr, stderr
    return stderr.strip()


def copies(disk):
    """What the staging folders under a disk hold besides their locks (copies, partial or not)."""
    return sorted(
        str(p.relative_to(disk))
        for folder in disk.glob("hpcml-stage-*")
        for p in folder.iterdir()
        if not p.name.startswith(".lock")
    )


def used_kib(disk):
    stats = os.statvfs(disk)
    return (stats.f_blocks - stats.f_bfree) * stats.f_frsize // 1024


def lock_of(stage, source):
    """The lock the wrapper takes for staging `source` (named by cksum of its path)."""
    digest = subprocess.run(["cksum"], input=str(source).encode(), capture_output=True, check=True).stdout
    return stage / f".lock-{digest.split()[0].decode()}-{source.name}"


def wait_or_fail(ready, seconds, what):
    if not wait_until(ready, seconds, 0.05):
        pytest.fail(f"no {what} within {seconds} s")


def waiters(lock):
    """How many processes are blocked in flock() on this file."""
    return sum(mode.startswith("->") for mode in flocks(lock))


@NEEDS_ROOT
def test_a_copy_that_cannot_fit_is_refused_before_it_begins(env, tmp_path, tmpfs):
    disk = tmpfs("nvme", "size=4m")
    data = dataset(tmp_path / "dataset", [2 << 20] * 3)  # 6 MiB for a 4 MiB disk
    result = wrap("exec", "true", env=dict(env, SING_STAGE=str(data), HPCML_NODE_LOCAL=str(disk), SLURM_JOB_ID="81"))
    line = one_line_error(
        result.returncode,
        result.stderr,
        f"SING_STAGE: copying {data} to {disk} failed before it began, not enough space: ",
    )
    need, free = map(int, SPACE.search(line).groups())
    assert need >= 6 << 10 and free <= 4 << 10
    assert runs(tmp_path) == []  # the runtime never started
    assert copies(disk) == [] and used_kib(disk) < 64  # nothing was copied


def in_memory_site(tmp_path, tmpdir):
    """LUMI's site file as `hpcml render` writes it, its tmpdir (/tmp, the node's memory there)
    moved to ``tmpdir``."""
    from dataclasses import replace

    from conftest import recipe_tree

    from builder.render.sitefile import render_site

    lumi = recipe_tree().sites["lumi"]
    assert lumi.scratch.tmpdir_in_memory
    site_file = tmp_path / "lumi.sh"
    site_file.write_text(render_site(replace(lumi, scratch=replace(lumi.scratch, tmpdir=str(tmpdir)))))
    return site_file


@pytest.mark.parametrize("site, memory_mib, fits", [("lumi", 4, False), ("lumi", 64, True), ("local", 4, True)])
def test_a_copy_to_a_tmpdir_in_memory_must_also_fit_the_jobs_memory(env, tmp_path, site, memory_mib, fits):
    """On LUMI /tmp is memory: a copy there is charged to the job, so its --mem
    (SLURM_MEM_PER_NODE, MiB) counts as the room left when it is less than df's; on a site
    whose tmpdir is a disk the job's memory plays no part."""
    tmpdir = tmp_path / "node-tmp"
    tmpdir.mkdir()
    data = dataset(tmp_path / "dataset", [2 << 20] * 3)  # 6 MiB
    where = {"HPCML_SITE_FILE": str(in_memory_site(tmp_path, tmpdir))} if site == "lumi" else {"TMPDIR": str(tmpdir)}
    result = wrap(
        "exec",
        "true",
        env=dict(env, **where, SING_STAGE=str(data), SLURM_JOB_ID="80", SLURM_MEM_PER_NODE=str(memory_mib)),
    )
    if fits:
        assert result.returncode == 0, result.stderr
        [copy] = [bound(argv)[-1].split(":")[0] for argv in runs(tmp_path)]
        assert copy.startswith(f"{tmpdir}/hpcml-stage-80/") and copy.endswith("-dataset")
        return
    line = one_line_error(
        result.returncode,
        result.stderr,
        f"SING_STAGE: copying {data} to {tmpdir} failed before it began, not enough space: ",
    )
    assert (
        f"KiB needed (du -sk), 4096 KiB free (the job's memory, SLURM_MEM_PER_NODE=4 MiB: {tmpdir} is memory on lumi)"
        in line
    )
    assert runs(tmp_path) == [] and copies(tmpdir) == []


@NEEDS_ROOT
@pytest.mark.parametrize("how", ["bytes-precheck-off", "inodes"])
def test_a_copy_that_fills_the_disk_part_way_is_removed_and_nothing_runs(env, tmp_path, tmpfs, how):
    if how == "bytes-precheck-off":
        # what other writers filling the disk during the copy do, made certain: no precheck
        disk = tmpfs("nvme", "size=4m")
        data = dataset(tmp_path / "dataset", [2 << 20] * 3)
        extra = {"HPCML_STAGE_PRECHECK": "0"}
    else:
        # du says 800 KiB fits in 4 MiB, but the disk has inodes for 60 of the 200 files
        disk = tmpfs("nvme", "size=4m,nr_inodes=64")
        data = dataset(tmp_path / "dataset", [1000] * 200)
        extra = {}
    result = wrap(
        "exec", "true", env=dict(env, SING_STAGE=str(data), HPCML_NODE_LOCAL=str(disk), SLURM_JOB_ID="82", **extra)
    )
    line = one_line_error(
        result.returncode,
        result.stderr,
        f"SING_STAGE: copying {data} to {disk} failed part way (No space left on device): ",
    )
    need, free = map(int, SPACE.search(line).groups())
    assert need > 0 and free > 0 and "the partial copy was removed" in line
    if how == "inodes":
        # 200 files and their folder, against the inodes left
        assert re.search(r", 201 inodes needed \(du --inodes\), \d+ free \(df -Pi\);", line), line
    else:
        assert need >= 6 << 10 and free <= 4 << 10
    assert runs(tmp_path) == []
    assert copies(disk) == [] and used_kib(disk) < 64  # no half copy left


@NEEDS_ROOT
@pytest.mark.parametrize("precheck", ["1", "0"])
def test_two_tasks_of_a_job_whose_copy_does_not_fit_stop_with_the_same_line(env, tmp_path, tmpfs, precheck):
    disk = tmpfs("nvme", "size=4m")
    data = dataset(tmp_path / "dataset", [2 << 20] * 3)
    env = dict(env, SING_STAGE=str(data), HPCML_NODE_LOCAL=str(disk), SLURM_JOB_ID="83", HPCML_STAGE_PRECHECK=precheck)
    tasks = [start("exec", "true", env=env) for _ in range(2)]
    errors = [task.communicate(timeout=60)[1] for task in tasks]
    lines = [
        one_line_error(task.returncode, err, f"SING_STAGE: copying {data} to {disk} failed")
        for task, err in zip(tasks, errors)
    ]
    assert lines[0] == lines[1]
    assert runs(tmp_path) == [] and copies(disk) == []


@NEEDS_ROOT
def test_a_task_waiting_for_a_copy_that_fails_gets_its_error_and_never_copies_again(env, tmp_path, tmpfs):
    disk = tmpfs("nvme", "size=4m")
    data = dataset(tmp_path / "dataset", [2 << 20] * 3)
    env = dict(env, SING_STAGE=str(data), HPCML_NODE_LOCAL=str(disk), SLURM_JOB_ID="84", HPCML_STAGE_PRECHECK="0")
    stage = disk / "hpcml-stage-84"
    stage.mkdir(mode=0o700)
    lock = lock_of(stage, data)
    # The test holds the copy's lock until both tasks wait on it, so that neither can start
    # late: one then copies and fails part way, the other must take that failure as its own.
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        tasks = [start("-v", "exec", "true", env=env) for _ in range(2)]
        wait_or_fail(lambda: waiters(lock) == 2, 30, "two tasks waiting on the lock")
    errors = [task.communicate(timeout=60)[1] for task in tasks]
    assert [task.returncode for task in tasks] == [2, 2], errors
    lines = [err.strip().splitlines()[-1] for err in errors]
    assert lines[0] == lines[1] and lines[0].startswith(PREFIX)
    assert f"copying {data} to {disk} failed part way (No space left on device)" in lines[0]
    shared = [f"the copy of {data} failed in another task of this job" in err for err in errors]
    assert sorted(shared) == [False, True], errors  # one copied, one read its failure
    assert runs(tmp_path) == [] and copies(disk) == []


@NEEDS_ROOT
def test_two_tasks_of_a_job_bind_one_complete_copy_made_once(env, tmp_path, tmpfs):
    disk = tmpfs("nvme", "size=8m")
    data = dataset(tmp_path / "dataset", [1 << 20] * 2)
    env = dict(env, SING_STAGE=str(data), HPCML_NODE_LOCAL=str(disk), SLURM_JOB_ID="85")
    tasks = [start("-v", "exec", "true", env=env) for _ in range(2)]
    errors = [task.communicate(timeout=60)[1] for task in tasks]
    assert [task.returncode for task in tasks] == [0, 0], errors
    stage = disk / "hpcml-stage-85"
    [copy] = [stage / name for name in os.listdir(stage) if not name.startswith(".")]
    assert [bound(argv)[-1] for argv in runs(tmp_path)] == [f"{copy}:{data}"] * 2
    made = [f"copied {data} to {copy}" in err for err in errors]
    reused = [f"using the copy of {data} that another task made" in err for err in errors]
    assert sorted(zip(made, reused)) == [(False, True), (True, False)], errors  # copied once
    # both runtimes were handed the folder that is there now (no second copy replaced it)
    inodes = [p.read_text() for p in (tmp_path / "runs").glob("inodes.*")]
    assert len(inodes) == 2 and all(f"{copy.stat().st_ino} {copy}\n" in text for text in inodes)
    for shard in data.iterdir():
        assert (copy / shard.name).read_bytes() == shard.read_bytes()
    assert sorted(os.listdir(copy)) == sorted(os.listdir(data) + [".hpcml-staged"])


@NEEDS_ROOT
def test_a_later_run_tries_again_once_the_copy_fits(env, tmp_path, tmpfs):
    # a failure is shared only with the tasks that were waiting for that copy; a run that
    # starts afterwards (space freed, data trimmed) copies afresh
    disk = tmpfs("nvme", "size=4m")
    data = dataset(tmp_path / "dataset", [2 << 20] * 3)
    env = dict(env, SING_STAGE=str(data), HPCML_NODE_LOCAL=str(disk), SLURM_JOB_ID="86")
    failed = wrap("exec", "true", env=env)
    one_line_error(failed.returncode, failed.stderr, "not enough space")
    (data / "shard-1.bin").unlink()
    (data / "shard-2.bin").unlink()
    result = wrap("exec", "true", env=env)
    assert result.returncode == 0, result.stderr
    [argv] = runs(tmp_path)
    copy, original = bound(argv)[-1].split(":")
    assert original == str(data) and copies(disk) == [str(Path(copy).relative_to(disk))]


def test_a_task_gives_up_waiting_for_a_copy_after_hpcml_stage_wait(env, tmp_path):
    data = dataset(tmp_path / "dataset", [1000])
    local = tmp_path / "nvme"
    stage = local / "hpcml-stage-87"
    stage.mkdir(parents=True, mode=0o700)
    env = dict(env, SING_STAGE=str(data), HPCML_NODE_LOCAL=str(local), SLURM_JOB_ID="87", HPCML_STAGE_WAIT="1")
    with open(lock_of(stage, data), "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # a copy that never ends
        started = time.monotonic()
        result = wrap("exec", "true", env=env)
        waited = time.monotonic() - started
    one_line_error(
        result.returncode,
        result.stderr,
        f"SING_STAGE: waited 1 s (HPCML_STAGE_WAIT) for another task copying {data} to {local}",
    )
    assert waited < 20 and runs(tmp_path) == [] and copies(local) == []


def test_a_staged_folder_is_the_copy_at_its_original_path_in_the_container(apptainer, cpu_image, env, tmp_path):
    data = tmp_path / "dataset"
    data.mkdir()
    (data / "train.txt").write_text("sample\n")
    local = tmp_path / "nvme"
    env = dict(
        env,
        SING_IMAGE=str(cpu_image),
        HPCML_APPTAINER=apptainer,
        SING_STAGE=str(data),
        HPCML_NODE_LOCAL=str(local),
        SLURM_JOB_ID="88",
    )
    result = wrap(
        "-v", "exec", "sh", "-c", 'cat "$1/train.txt"; stat -c %i "$1/train.txt"', "sh", data, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr
    text, inode = result.stdout.splitlines()
    [copy] = [p for p in (local / "hpcml-stage-88").glob("*-dataset") if not p.name.startswith(".")]
    assert text == "sample" and f"staged {data} to {copy}" in result.stderr
    # the file the program read at the original path is the copy's, not the original's
    assert int(inode) == (copy / "train.txt").stat().st_ino != (data / "train.txt").stat().st_ino


def test_the_next_job_on_a_node_removes_the_copies_of_ended_jobs_and_keeps_the_rest(slurm, env, tmp_path):
    """The cleanup rule with a real Slurm: a job that copies first removes this user's
    hpcml-stage-<id> folders whose job squeue reports ended or does not know."""
    local = tmp_path / "nvme"
    data = dataset(tmp_path / "dataset", [1000])
    env = dict(env, SLURM_CONF=slurm.env["SLURM_CONF"], SING_STAGE=str(data), HPCML_NODE_LOCAL=str(local))

    def submit(command):
        result = subprocess.run(
            ["sbatch", "--parsable", "-o", str(tmp_path / "job-%j.out"), "--wrap", command],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout.strip().split(";")[0]

    def logs():
        return "\n".join(p.read_text() for p in sorted(tmp_path.glob("job-*.out")))

    wrapper = shlex.quote(str(WRAPPER))
    running = submit(f"{wrapper} exec true && sleep 300")
    try:
        wait_or_fail(
            lambda: (local / f"hpcml-stage-{running}").is_dir() and runs(tmp_path), 120, "copy by the running job"
        )
        ended = submit(f"{wrapper} -v exec true")
        assert wait_for(ended, env, timeout=120)[0] == "COMPLETED", logs()
        assert (local / f"hpcml-stage-{ended}").is_dir()
        # folders of a job Slurm never knew, of another user, and of runs outside Slurm
        (local / "hpcml-stage-999999").mkdir()
        (local / "hpcml-stage-999998").mkdir()
        os.chown(local / "hpcml-stage-999998", 65534, 65534)
        (local / f"hpcml-stage-user{os.getuid()}").mkdir()
        following = submit(f"{wrapper} -v exec true")
        assert wait_for(following, env, timeout=120)[0] == "COMPLETED", logs()
        left = sorted(p.name for p in local.glob("hpcml-stage-*"))
        assert left == sorted(
            [
                f"hpcml-stage-{running}",
                f"hpcml-stage-{following}",
                "hpcml-stage-999998",
                f"hpcml-stage-user{os.getuid()}",
            ]
        ), logs()
        assert f"job {ended} has ended" in logs() and "job 999999 has ended" in logs()
    finally:
        subprocess.run(["scancel", running], env=env, timeout=30)


@pytest.mark.parametrize(
    "squeue",
    [
        'echo "slurm_load_jobs error: Unable to contact slurm controller (connect failure)" >&2; exit 1',
        "exec sleep 60",  # a controller that never answers: timeout 10
    ],
)
def test_copies_of_other_jobs_are_kept_when_slurm_does_not_answer(env, tmp_path, squeue):
    # the one stand-in squeue here (the real one is in the test above): a controller that is down
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "squeue").write_text(f"#!/bin/sh\n{squeue}\n")
    (tools / "squeue").chmod(0o755)
    local = tmp_path / "nvme"
    (local / "hpcml-stage-70").mkdir(parents=True)
    data = dataset(tmp_path / "dataset", [1000])
    started = time.monotonic()
    result = wrap(
        "-v",
        "exec",
        "true",
        env=dict(
            env,
            PATH=f"{tools}{os.pathsep}{env['PATH']}",
            SING_STAGE=str(data),
            HPCML_NODE_LOCAL=str(local),
            SLURM_JOB_ID="71",
        ),
    )
    assert result.returncode == 0, result.stderr
    assert (local / "hpcml-stage-70").is_dir() and "keeping staged copies of other jobs" in result.stderr
    assert time.monotonic() - started < 40


def test_unstage_removes_this_jobs_copies_and_no_others(env, tmp_path):
    local = tmp_path / "nvme"
    data = dataset(tmp_path / "dataset", [1000])
    env = dict(env, SING_STAGE=str(data), HPCML_NODE_LOCAL=str(local))
    for job in ("91", "92", ""):
        assert wrap("exec", "true", env=dict(env, SLURM_JOB_ID=job)).returncode == 0
    folders = {"91", "92", f"user{os.getuid()}"}
    assert {p.name[len("hpcml-stage-") :] for p in local.iterdir()} == folders
    # at a job's end, without an image or a runtime
    bare = {k: v for k, v in env.items() if k not in ("SING_IMAGE", "HPCML_APPTAINER", "SING_STAGE")}
    result = wrap("unstage", env=dict(bare, SLURM_JOB_ID="91"))
    assert result.returncode == 0 and result.stderr == ""
    assert {p.name[len("hpcml-stage-") :] for p in local.iterdir()} == folders - {"91"}
    assert wrap("unstage", env=bare).returncode == 0  # outside Slurm: the user's
    assert [p.name for p in local.iterdir()] == ["hpcml-stage-92"]
    extra = wrap("unstage", "now", env=bare)
    one_line_error(extra.returncode, extra.stderr, "unstage takes no arguments")


def test_help_shows_the_whole_header_with_unstage_and_the_staging_settings(env):
    result = wrap("--help", env=env)
    header = [
        line.removeprefix("#").removeprefix(" ")
        for line in WRAPPER.read_text().split("\nset -euo pipefail\n")[0].splitlines()[1:]
    ]
    assert result.returncode == 0 and result.stdout.splitlines() == header
    assert "unstage" in result.stdout and "HPCML_STAGE_WAIT" in result.stdout


@pytest.fixture
def read_only_dir(tmp_path):
    with small_disk(tmp_path / "read-only", "ro,size=1m") as disk:
        yield disk


# (id, settings, the message): {tmp} is the test's folder, {data} a dataset, {file} a plain file
BAD_SETTINGS = [
    ("job-id-letters", {"SLURM_JOB_ID": "12a"}, "SLURM_JOB_ID is '12a', expected a whole number"),
    ("job-id-path", {"SLURM_JOB_ID": "../7"}, "SLURM_JOB_ID is '../7', expected a whole number"),
    ("procid", {"SLURM_PROCID": "zero"}, "SLURM_PROCID is 'zero', expected a whole number"),
    ("ntasks", {"SLURM_NTASKS": "-4"}, "SLURM_NTASKS is '-4', expected a whole number"),
    ("num-nodes", {"SLURM_JOB_NUM_NODES": "2(x3)"}, "SLURM_JOB_NUM_NODES is '2(x3)', expected a whole number"),
    ("localid", {"SLURM_LOCALID": "0x1"}, "SLURM_LOCALID is '0x1', expected a whole number"),
    ("stage-wait", {"HPCML_STAGE_WAIT": "1h"}, "HPCML_STAGE_WAIT is '1h', expected a whole number"),
    ("stage-precheck", {"HPCML_STAGE_PRECHECK": "yes"}, "HPCML_STAGE_PRECHECK is 'yes', expected 0"),
    ("stage-missing", {"SING_STAGE": "{tmp}/no-such-data"}, "SING_STAGE: {tmp}/no-such-data is not a directory"),
    ("stage-file", {"SING_STAGE": "{file}"}, "SING_STAGE: {file} is not a directory"),
    ("stage-colon", {"SING_STAGE": "{tmp}/a:b"}, "SING_STAGE: {tmp}/a:b has a ':', which a bind cannot carry"),
    (
        "stage-holds-root",
        {"SING_STAGE": "{tmp}", "HPCML_NODE_LOCAL": "{tmp}/nvme"},
        "SING_STAGE: {tmp} holds the staging folder {tmp}/nvme (HPCML_NODE_LOCAL)",
    ),
    ("node-local-file", {"HPCML_NODE_LOCAL": "{file}"}, "SING_STAGE: {file} (HPCML_NODE_LOCAL) is not a directory"),
    (
        "node-local-uncreatable",
        {"HPCML_NODE_LOCAL": "{file}/sub"},
        "SING_STAGE: cannot create {file}/sub (HPCML_NODE_LOCAL): Not a directory",
    ),
    (
        "node-local-read-only",
        {"HPCML_NODE_LOCAL": "{read_only}"},
        "SING_STAGE: {read_only} (HPCML_NODE_LOCAL) is not writable",
    ),
    ("image-empty", {"SING_IMAGE": ""}, "no image: set SING_IMAGE or pass --image"),
    ("image-missing", {"SING_IMAGE": "{tmp}/no-such.sif"}, "image not found: {tmp}/no-such.sif"),
    ("image-directory", {"SING_IMAGE": "{tmp}/runs"}, "image {tmp}/runs is a directory, not an image"),
    ("image-device", {"SING_IMAGE": "/dev/null"}, "image /dev/null is not a file"),
    ("site", {"HPCML_SITE": "nosuch"}, "nosuch.sh; set HPCML_SITE to one of: "),
    (
        "runtime-missing",
        {"HPCML_APPTAINER": "{tmp}/no-such-apptainer"},
        "HPCML_APPTAINER is '{tmp}/no-such-apptainer', which is no program here",
    ),
    ("runtime-directory", {"HPCML_APPTAINER": "{tmp}"}, "HPCML_APPTAINER is '{tmp}', which is no program here"),
    (
        "runtime-not-on-path",
        {"HPCML_APPTAINER": "no-such-apptainer"},
        "HPCML_APPTAINER is 'no-such-apptainer', which is no program here",
    ),
]


@pytest.mark.parametrize(
    "settings, message", [case[1:] for case in BAD_SETTINGS], ids=[case[0] for case in BAD_SETTINGS]
)
def test_bad_settings_get_one_line_status_2_and_never_start_the_runtime(env, tmp_path, request, settings, message):
    data = dataset(tmp_path / "dataset", [1000])
    (tmp_path / "a:b").mkdir()
    (tmp_path / "file").write_text("not a folder\n")
    places = {"tmp": tmp_path, "data": data, "file": tmp_path / "file"}
    if "{read_only}" in str(settings):
        places["read_only"] = request.getfixturevalue("read_only_dir")
    # every case would otherwise stage a dataset: a fault must stop it before any copy
    env = {
        **env,
        "SING_STAGE": str(data),
        "HPCML_NODE_LOCAL": str(tmp_path / "nvme"),
        "SLURM_JOB_ID": "93",
        **{name: value.format(**places) for name, value in settings.items()},
    }
    result = wrap("exec", "true", env=env)
    one_line_error(result.returncode, result.stderr, message.format(**places))
    assert runs(tmp_path) == []
    assert not (tmp_path / "nvme").exists() or copies(tmp_path / "nvme") == []


@pytest.mark.parametrize(
    "content",
    [b"", b"text, not an image\n", "random", b"hsq", SIF_HEADER[:40]],
    ids=["empty", "text", "random", "short", "cut-header"],
)
def test_a_file_that_is_no_image_gets_one_line_and_never_starts_the_runtime(env, tmp_path, content):
    # checked by its magic before the runtime starts (Apptainer says FATAL and exits 255)
    image = Path(env["SING_IMAGE"])
    image.write_bytes(os.urandom(4096) if content == "random" else content)
    result = wrap("exec", "true", env=env)
    one_line_error(result.returncode, result.stderr, f"image {image} is not a container image")
    assert runs(tmp_path) == []


@pytest.mark.parametrize(
    "header", [SIF_HEADER, b"hsqs" + bytes(60), bytes(1080) + b"\x53\xef"], ids=["sif", "squashfs", "ext3"]
)
def test_each_image_format_the_runtime_takes_passes_the_check(env, tmp_path, header):
    Path(env["SING_IMAGE"]).write_bytes(header)
    result = wrap("exec", "true", env=env)
    assert result.returncode == 0, result.stderr
    assert len(runs(tmp_path)) == 1


def test_an_image_its_user_cannot_read_gets_one_line(env):
    # root reads every file, so this runs the wrapper as nobody, in a folder nobody can enter
    folder = Path(tempfile.mkdtemp(prefix="hpcml-unreadable-"))
    try:
        folder.chmod(0o755)
        image = folder / "image.sif"
        image.write_bytes(SIF_HEADER)
        image.chmod(0)
        recorder = folder / "apptainer"
        recorder.write_text(f"#!/bin/sh\ntouch {shlex.quote(str(folder / 'ran'))}\n")
        recorder.chmod(0o755)
        as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        if os.geteuid() != 0 or subprocess.run([*as_nobody, "test", "-r", str(WRAPPER)], timeout=30).returncode:
            pytest.skip("needs root, and a checkout that nobody can read")
        result = subprocess.run(
            [*as_nobody, str(WRAPPER), "exec", "true"],
            capture_output=True,
            text=True,
            env=dict(env, SING_IMAGE=str(image), HPCML_APPTAINER=str(recorder), HOME=str(folder), TMPDIR=str(folder)),
            timeout=60,
        )
        one_line_error(result.returncode, result.stderr, f"image not readable: {image}")
        assert not (folder / "ran").exists()
    finally:
        shutil.rmtree(folder)


# issue 34: the SIF header names the image's architecture ("02": amd64, "04": arm64)
SIF_ARCH = {"x86_64": b"02\0", "aarch64": b"04\0"}


def other_arch():
    return "aarch64" if os.uname().machine == "x86_64" else "x86_64"


def test_an_image_of_another_architecture_is_refused_in_one_line_unless_emulation_is_asked_for(env, tmp_path):
    image = Path(env["SING_IMAGE"])
    image.write_bytes(SIF_HEADER + SIF_ARCH[other_arch()] + bytes(64))
    result = wrap("exec", "true", env=env)
    line = one_line_error(result.returncode, result.stderr, f"image {image} is built for {other_arch()}")
    assert line.endswith(
        f"and this node is {os.uname().machine}: it would run emulated, many times slower, or fail; run it on an "
        f"{other_arch()} node (HPCML_ALLOW_EMULATION=1 runs it anyway)"
    )
    assert runs(tmp_path) == []
    result = wrap("-v", "exec", "true", env=dict(env, HPCML_ALLOW_EMULATION="1"))
    assert result.returncode == 0 and "running it emulated (HPCML_ALLOW_EMULATION=1)" in result.stderr
    assert len(runs(tmp_path)) == 1


@pytest.mark.parametrize("code", [None, b"00\0", b"06\0"], ids=["native", "unknown", "ppc64le"])
def test_an_image_of_this_architecture_or_one_the_header_does_not_name_runs(env, tmp_path, code):
    code = code or SIF_ARCH.get(os.uname().machine, b"00\0")
    Path(env["SING_IMAGE"]).write_bytes(SIF_HEADER + code + bytes(64))
    result = wrap("exec", "true", env=env)
    assert result.returncode == 0, result.stderr


def test_a_value_with_control_characters_is_shown_escaped_on_one_line(env):
    """A carriage return or an escape sequence in a quoted value would hide part of the line
    on a terminal, a newline would print a second one: each is shown escaped."""
    site = "bad\r\x1b[2Kfaké\nsecond\x7f"
    result = wrap("exec", "true", env=dict(env, HPCML_SITE=site))
    line = one_line_error(result.returncode, result.stderr, "no site settings at ")
    assert "sites/bad\\r\\x1b[2Kfaké\\nsecond\\x7f.sh;" in line and line.isprintable(), line
