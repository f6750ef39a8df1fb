"""singularity_wrapper with the real CPU image and the real runtime (Apptainer or the toolbox)."""

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import ROOT, SIF_HEADER, tmpfs
from helpers.child_signals import default_signals

WRAPPER = ROOT / "wrappers" / "singularity_wrapper"
NASTY = [
    "two words",
    "it's",
    'say "hi"',
    "line\nbreak",
    "*",
    "$(touch /tmp/pwned)",
    "`id`",
    "",
    "-n",
    "--help",
    "back\\slash",
    "tab\there",
    "ä€",
]


@pytest.fixture
def env(apptainer, cpu_image, tmp_path):
    scratch = tmp_path / "tmpdir"
    scratch.mkdir()
    return dict(
        os.environ, SING_IMAGE=str(cpu_image), HPCML_APPTAINER=apptainer, HPCML_SITE="local", TMPDIR=str(scratch)
    )


def wrap(*args, env, **kwargs):
    return subprocess.run([str(WRAPPER), *map(str, args)], env=env, capture_output=True, timeout=300, **kwargs)


def test_arguments_pass_through_byte_for_byte(env):
    result = wrap("exec", "sh", "-c", 'printf "%s\\0" "$@"', "sh", *NASTY, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().split("\0")[:-1] == NASTY


def test_exit_status_comes_back(env):
    assert wrap("exec", "sh", "-c", "exit 7", env=env).returncode == 7


def test_sigterm_reaches_the_program(env):
    # the wrapper execs the runtime, so Slurm's SIGTERM to the task is the program's SIGTERM
    process = subprocess.Popen(
        [
            str(WRAPPER),
            "exec",
            "sh",
            "-c",
            'trap "echo got-term; exit 42" TERM; echo ready; while :; do sleep 0.1; done',
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_signals,  # a shell cannot trap TERM if it starts with TERM ignored
    )
    assert process.stdout.readline().strip() == "ready"
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=60)
    assert "got-term" in out and process.returncode == 42


def test_no_shell_is_left_between_the_caller_and_the_runtime(env):
    process = subprocess.Popen([str(WRAPPER), "exec", "sleep", "30"], env=env)
    try:
        time.sleep(3)
        children = subprocess.run(
            ["ps", "-o", "comm=", "--ppid", str(process.pid)], capture_output=True, text=True
        ).stdout.split()
        command = open(f"/proc/{process.pid}/comm").read().strip()
        assert command not in ("bash", "sh") and "singularity_wra" not in command, command
        assert "bash" not in children
    finally:
        process.kill()
        process.wait()


def test_site_binds_and_user_data_are_visible(env, tmp_path):
    (tmp_path / "tmpdir" / "marker").write_text("from TMPDIR\n")
    data = tmp_path / "project data"
    data.mkdir()
    (data / "x.txt").write_text("project\n")
    env = dict(env, SING_BIND=f"{data},/no/such/path")
    result = wrap("-v", "exec", "sh", "-c", 'cat "$TMPDIR/marker" "$1/x.txt"', "sh", data, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode() == "from TMPDIR\nproject\n"
    assert "skipping bind /no/such/path" in result.stderr.decode()  # a warning, not an error


@pytest.mark.parametrize("variable", ["APPTAINER_BIND", "SINGULARITY_BIND"])
def test_places_a_site_module_binds_already_are_not_bound_twice(env, tmp_path, variable):
    """LUMI's bindings modules put their binds in SINGULARITY_BIND; the site's binds that
    repeat them are left to the runtime (which only warned about the duplicate before)."""
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    for folder in (mine, theirs):
        folder.mkdir()
        (folder / "x.txt").write_text(f"{folder.name}\n")
    env = {k: v for k, v in env.items() if k not in ("APPTAINER_BIND", "SINGULARITY_BIND")}
    env.update(SING_BIND=f"{mine},{theirs}", **{variable: f"{tmp_path}/tmpdir,{theirs}:{theirs}:ro"})
    result = wrap("-v", "exec", "cat", mine / "x.txt", theirs / "x.txt", env=env)
    stderr = result.stderr.decode()
    assert result.stdout.decode() == "mine\ntheirs\n", stderr
    assert (
        f"skipping bind {theirs}: APPTAINER_BIND or SINGULARITY_BIND (a site module) binds {theirs} already" in stderr
    )
    assert f"skipping bind {mine}" not in stderr
    assert "already in the mount point list" not in stderr


def test_staged_data_is_copied_to_node_local_disk_once_and_bound_over_the_original(env, tmp_path):
    data = tmp_path / "dataset"
    data.mkdir()
    (data / "train.txt").write_text("sample\n")
    local = tmp_path / "nvme"
    env = dict(env, SING_STAGE=str(data), HPCML_NODE_LOCAL=str(local), SLURM_JOB_ID="77")
    script = 'cat "$1/train.txt"; touch "$1/written-inside"'
    runs = [
        subprocess.Popen(
            [str(WRAPPER), "exec", "sh", "-c", script, "sh", str(data)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(3)
    ]
    outputs = [run.communicate(timeout=120) for run in runs]
    assert all(run.returncode == 0 for run in runs), [err for _, err in outputs]
    assert all(out == b"sample\n" for out, _ in outputs)
    copies = [p for p in (local / "hpcml-stage-77").glob("*-dataset") if p.is_dir()]
    assert len(copies) == 1  # three tasks, one copy
    assert (copies[0] / "written-inside").exists()  # the tasks used the copy
    assert not (data / "written-inside").exists()  # the original is untouched


def test_env_reaches_the_program(env):
    result = wrap("exec", "sh", "-c", 'echo "$HPCML_MASTER_PORT_BASE:$HOST_VAR"', env=dict(env, HOST_VAR="x y"))
    assert result.stdout.decode() == "20000:x y\n"  # the local site's port base


def test_sing_flags_are_split_but_never_evaluated(env, tmp_path):
    canary = tmp_path / "canary"
    env = dict(env, SING_FLAGS=f"--cleanenv --env HPCML_X=1 $(touch {canary})", HOST_ONLY="yes")
    result = wrap("exec", "sh", "-c", 'echo "${HPCML_X:-}:${HOST_ONLY:-}"', env=env)
    # "$(touch" is passed on as a word, so apptainer rejects it; nothing ran
    assert not canary.exists()
    env["SING_FLAGS"] = "--cleanenv --env HPCML_X=1"
    result = wrap("exec", "sh", "-c", 'echo "${HPCML_X:-}:${HOST_ONLY:-}"', env=env)
    assert result.stdout.decode().strip() == "1:"


def test_run_uses_the_image_runscript_and_shell_takes_a_shell(env):
    assert wrap("run", "sh", "-c", "echo from-run", env=env).stdout.decode() == "from-run\n"
    result = wrap("shell", "-s", "/bin/sh", env=env, input=b"echo from-shell\n")
    assert "from-shell" in result.stdout.decode()


def test_run_hands_python_its_own_options(env):
    # `run -c CODE` and `run -m MODULE` mean python's options (run alone starts python); the
    # runscript used to exec "-c" as a program
    result = wrap("run", "-c", "import sys; print(6 * 7, sys.argv[1:])", "x", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode() == "42 ['x']\n"
    result = wrap("run", "-m", "platform", env=env)
    assert result.returncode == 0 and "Linux" in result.stdout.decode(), result.stderr


def test_apptainer_wrapper_is_the_same_program(env):
    alias = ROOT / "wrappers" / "apptainer_wrapper"
    result = subprocess.run([str(alias), "exec", "true"], env=env, timeout=120)
    assert alias.is_symlink() and result.returncode == 0


@pytest.mark.parametrize(
    "args, extra_env, message",
    [
        (["exec"], {}, "exec needs a command"),
        (["frobnicate"], {}, "unknown command 'frobnicate'"),
        ([], {}, "expected a command"),
        (["exec", "true"], {"SING_IMAGE": "/no/such.sif"}, "image not found"),
        (["exec", "true"], {"SING_IMAGE": ""}, "no image"),
        (["exec", "true"], {"HPCML_SITE": "puhti", "SLURM_JOB_ID": ""}, "inside a Slurm job"),
        (
            ["exec", "true"],
            {"HPCML_SITE": "nosuch"},
            "set HPCML_SITE to one of: jean-zay jean-zay-h100 jean-zay-v100 karolina local lumi mahti puhti",
        ),
        (["exec", "true"], {"HPCML_SITE": "jeanzay"}, "sites/jeanzay.sh (did you mean 'jean-zay'?); set HPCML_SITE"),
        (["exec", "true"], {"HPCML_SITE": "karolna"}, "sites/karolna.sh (did you mean 'karolina'?); set HPCML_SITE"),
    ],
)
def test_mistakes_get_one_line_and_exit_2(env, args, extra_env, message):
    result = wrap(*args, env=dict(env, **extra_env))
    stderr = result.stderr.decode()
    assert result.returncode == 2 and message in stderr
    assert stderr.count("\n") == 1 and stderr.startswith("error: singularity_wrapper:")


def test_a_site_whose_runtime_comes_from_a_module_names_it_when_none_is_found(tmp_path, cpu_image):
    """Jean Zay: singularity is on PATH only once `module load singularity` ran."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "SING_IMAGE": str(cpu_image),
        "HPCML_SITE": "jean-zay",
        "SLURM_JOB_ID": "1",
    }
    result = wrap("exec", "true", env=env)
    assert result.returncode == 2
    assert result.stderr.decode() == (
        "error: singularity_wrapper: neither apptainer nor singularity found; on "
        "jean-zay load it first: module load singularity\n"
    )


@pytest.mark.parametrize("sing_flags", ["", "--nv", "-B /data --nv"])
def test_the_gpu_flag_is_passed_once_when_a_module_also_put_it_in_sing_flags(tmp_path, sing_flags):
    # A stand-in runtime that prints its arguments: --nv needs an NVIDIA GPU, not on this machine.
    runtime = tmp_path / "apptainer"
    runtime.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    runtime.chmod(0o755)
    image = tmp_path / "image.sif"
    image.write_bytes(SIF_HEADER)
    env = dict(
        os.environ,
        SING_IMAGE=str(image),
        HPCML_APPTAINER=str(runtime),
        HPCML_SITE="puhti",
        SLURM_JOB_ID="1",
        SING_FLAGS=sing_flags,
    )
    argv = wrap("exec", "true", env=env).stdout.decode().splitlines()
    assert argv.count("--nv") == 1 and argv[-2:] == [str(image), "true"], argv


def test_multi_node_jobs_get_the_sites_network_settings_and_one_node_jobs_do_not(env):
    # the real LUMI settings: the image's own libfabric, so only NCCL_NET and HPE's rendezvous
    # settings come in, and only on jobs of more than one node (on one node NCCL_NET would stop
    # RCCL from using xGMI alone; alt_read goes with the srun option of multi-node scripts only)
    env = dict(env, HPCML_SITE="lumi")
    show = (
        'echo "${NCCL_NET:-unset}|${LD_LIBRARY_PATH:-}|${FI_CXI_RDZV_PROTO:-unset}|${FI_CXI_RDZV_EAGER_SIZE:-unset}'
        '|${FI_CXI_RDZV_THRESHOLD:-unset}|${FI_CXI_RDZV_GET_MIN:-unset}"; python -c "import torch"'
    )
    two = wrap("exec", "sh", "-c", show, env=dict(env, SLURM_JOB_NUM_NODES="2"))
    assert two.returncode == 0, two.stderr
    net, library_path, *rdzv = two.stdout.decode().strip().split("|")
    assert net == "AWS Libfabric" and rdzv == ["alt_read", "0", "0", "0"]
    assert "cray" not in library_path and "/usr/lib64" not in library_path
    one = wrap("exec", "sh", "-c", show, env=dict(env, SLURM_JOB_NUM_NODES="1"))
    net, library_path, *rdzv = one.stdout.decode().strip().split("|")
    assert net == "unset" and "cray" not in library_path and rdzv == ["unset"] * 4


def test_the_images_environment_sees_no_host_variable_and_handed_values_replace_it(env, tmp_path):
    """Why LUMI's job scripts hand MIOpen's folders to the container as APPTAINERENV_ and
    SINGULARITYENV_ values (issue 33): the runtime evaluates the image's environment with the
    host's variables cleared (HOME kept), so a baked /tmp/${USER}-${SLURM_JOB_ID:-nojob}-miopen-db
    reads /tmp/-nojob-miopen-db in a job too, and a plain export on the host does not replace a
    value the image sets; the handed one does. A file bound beside the image's own environment
    script stands in for LUMI's %environment."""
    baked = tmp_path / "91-miopen.sh"
    baked.write_text('export MIOPEN_USER_DB_PATH="/tmp/${USER}-${SLURM_JOB_ID:-nojob}-miopen-db"\n')
    env = dict(env, SING_BIND=f"{baked}:/.singularity.d/env/91-miopen.sh", USER="alice", SLURM_JOB_ID="4242")
    show = ("exec", "sh", "-c", 'printf "%s" "$MIOPEN_USER_DB_PATH"')
    assert wrap(*show, env=env).stdout.decode() == "/tmp/-nojob-miopen-db"
    exported = dict(env, MIOPEN_USER_DB_PATH="/tmp/alice-4242-miopen-db")
    assert wrap(*show, env=exported).stdout.decode() == "/tmp/-nojob-miopen-db"
    handed = dict(
        env,
        APPTAINERENV_MIOPEN_USER_DB_PATH="/tmp/alice-4242-miopen-db",
        SINGULARITYENV_MIOPEN_USER_DB_PATH="/tmp/alice-4242-miopen-db",
    )
    assert wrap(*show, env=handed).stdout.decode() == "/tmp/alice-4242-miopen-db"


def test_a_run_no_job_script_started_gets_the_sites_job_folders_made_and_handed_over(env, tmp_path):
    """scratch.make_dirs for hand-written `srun singularity_wrapper exec ...` runs (LUMI's
    MIOpen caches): the wrapper expands ${USER} and ${SLURM_JOB_ID:-nojob} as the job script
    would, makes the folder and hands it over; a value a job script handed is left alone."""
    site_file = tmp_path / "site.sh"
    template = f"{tmp_path}/$" + "{USER}-$" + "{SLURM_JOB_ID:-nojob}-miopen-db"
    site_file.write_text(
        (WRAPPER.parent / "sites" / "local.sh").read_text() + f"HPCML_JOB_DIRS=('MIOPEN_USER_DB_PATH={template}')\n"
    )
    env = dict(env, HPCML_SITE_FILE=str(site_file), USER="alice")
    show = ("exec", "sh", "-c", 'printf "%s" "$MIOPEN_USER_DB_PATH"; test -d "$MIOPEN_USER_DB_PATH"')
    in_job = wrap(*show, env=dict(env, SLURM_JOB_ID="4242"))
    assert in_job.returncode == 0, in_job.stderr
    assert in_job.stdout.decode() == f"{tmp_path}/alice-4242-miopen-db"
    env.pop("SLURM_JOB_ID", None)
    assert wrap(*show, env=env).stdout.decode() == f"{tmp_path}/alice-nojob-miopen-db"
    handed = dict(env, APPTAINERENV_MIOPEN_USER_DB_PATH="/tmp", SINGULARITYENV_MIOPEN_USER_DB_PATH="/tmp")
    assert wrap(*show, env=handed).stdout.decode() == "/tmp"
    assert sorted(p.name for p in tmp_path.glob("*-miopen-db")) == ["alice-4242-miopen-db", "alice-nojob-miopen-db"]


def test_a_site_on_the_hosts_libfabric_binds_it_on_multi_node_jobs_only(env, tmp_path):
    """LUMI switched to libfabric: host, rendered from a copy of the recipes as an admin would."""
    from builder.recipes.tree import RecipeTree
    from builder.render.sitefile import render_site

    recipes = tmp_path / "recipes"
    shutil.copytree(ROOT / "recipes", recipes)
    site_yaml = recipes / "sites" / "lumi.yaml"
    site_yaml.write_text(site_yaml.read_text().replace("  libfabric: image", "  libfabric: host"))
    site_file = tmp_path / "lumi-host.sh"
    site_file.write_text(render_site(RecipeTree(recipes).sites["lumi"]))
    env = dict(env, HPCML_SITE_FILE=str(site_file))
    show = 'echo "${NCCL_NET:-unset}|${LD_LIBRARY_PATH:-}|$HPCML_SITE_FACTS"'
    two = wrap("-v", "exec", "sh", "-c", show, env=dict(env, SLURM_JOB_NUM_NODES="2"))
    assert two.returncode == 0, two.stderr
    net, library_path, facts = two.stdout.decode().strip().split("|")
    assert net == "AWS Libfabric"
    assert library_path.startswith("/opt/cray/libfabric/1.22.0/lib64:/usr/lib64")
    assert "skipping bind /opt/cray" in two.stderr.decode()  # no Cray stack on this machine
    # the preflight then expects the plugin to load the host's libfabric
    assert json.loads(facts)["network"]["host_library_path"][0] == "/opt/cray/libfabric/1.22.0/lib64"
    one = wrap("-v", "exec", "sh", "-c", show, env=dict(env, SLURM_JOB_NUM_NODES="1"))
    net, library_path, _ = one.stdout.decode().strip().split("|")
    assert net == "unset" and "cray" not in library_path
    assert "/opt/cray" not in one.stderr.decode()
    # a library path a site module set already stays, after the site's own
    kept = wrap(
        "exec", "sh", "-c", show, env=dict(env, SLURM_JOB_NUM_NODES="2", APPTAINERENV_LD_LIBRARY_PATH="/opt/site/lib")
    )
    assert kept.stdout.decode().split("|")[1].startswith("/opt/cray/libfabric/1.22.0/lib64:/usr/lib64:/opt/site/lib")


def test_the_site_facts_travel_to_the_container(env):
    result = wrap(
        "exec",
        "python",
        "-c",
        "import json, os; f = json.loads(os.environ['HPCML_SITE_FACTS']); "
        "print(f['site'], f['allreduce'][0]['busbw_gbs'])",
        env=env,
    )
    assert result.stdout.decode() == "local 0.6\n", result.stderr


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs standing in for a node's nearly full local disk."""
    with tmpfs(tmp_path / "small-disk", "size=1m") as disk:
        yield disk


def test_staging_that_does_not_fit_stops_the_run_and_binds_nothing(env, tmp_path, small_disk):
    data = tmp_path / "big-dataset"
    data.mkdir()
    (data / "shard-0.bin").write_bytes(os.urandom(3 << 20))  # 3 MiB for a 1 MiB disk
    canary = tmp_path / "ran"
    env = dict(env, SING_STAGE=str(data), HPCML_NODE_LOCAL=str(small_disk), SLURM_JOB_ID="78", SING_BIND=str(tmp_path))
    result = wrap("exec", "touch", canary, env=env)
    stderr = result.stderr.decode()
    assert result.returncode == 2, stderr
    assert f"SING_STAGE: copying {data} to {small_disk} failed" in stderr
    assert stderr.strip().splitlines()[-1].startswith("error: singularity_wrapper:")
    assert not canary.exists()  # the program never ran
    leftovers = [p for p in (small_disk / "hpcml-stage-78").iterdir() if not p.name.startswith(".lock")]
    assert leftovers == []  # no partial copy to reuse


def test_with_only_the_toolbox_the_wrapper_finds_it_and_binds_any_host_folder(env, tmp_path, apptainer):
    """A machine without Apptainer where `make build` provisioned the toolbox: the wrapper
    needs no HPCML_APPTAINER, and a bind outside the working tree, /tmp and $HOME works."""
    import shutil

    from builder.host import toolbox

    expected = shutil.which("apptainer") or shutil.which("singularity") or str(toolbox.command())
    outside = Path("/srv") / f"hpcml-test-{os.getpid()}"
    outside.mkdir(parents=True)
    try:
        (outside / "data.txt").write_text("from /srv\n")
        env = {k: v for k, v in env.items() if k != "HPCML_APPTAINER"}
        result = subprocess.run(
            [str(WRAPPER), "-v", "exec", "cat", str(outside / "data.txt")],
            env=dict(env, SING_BIND=str(outside)),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout == "from /srv\n"
        assert f"exec {expected} exec" in result.stderr
    finally:
        shutil.rmtree(outside)
