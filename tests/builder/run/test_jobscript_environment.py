"""`builder jobscript`: what a script sets up before it launches (builder/run/job_environment.py).
The variables it exports, the data it binds and stages, the modules it loads (the site's, the
host MPI's, a published version's), the image and the wrapper it finds, the options every srun
step carries where the site needs them, and the node-local folders made before the ranks start;
the set-up run in bash with stand-ins for `module` and `srun`."""

import itertools
import json
import re
import shutil
import subprocess

import pytest
from conftest import ROOT
from helpers.cli_here import run_here
from helpers.job_scripts import WRAPPER, every_script, launch_line, make, sbatch_lines

from builder.errors import RecipeError
from builder.recipes.tree import RecipeTree
from builder.run import jobscript
from builder.run.jobscript import LAUNCHES, Request


def test_options_and_the_reasons_are_in_the_script(tree):
    plan, text = make(
        tree,
        "lumi-rocm",
        gpus=2,
        binds=("/scratch/p/data",),
        stage=("/scratch/p/ds",),
        image="/appl/images/lumi.sif",
        account="project_465000001",
    )
    assert "export SING_IMAGE=/appl/images/lumi.sif" in text
    assert "export SING_BIND=/scratch/p/data" in text and "export SING_STAGE=/scratch/p/ds" in text
    assert (
        'unstage() { srun --ntasks="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 singularity_wrapper unstage || true; }\n'
        "trap 'remove_node_dirs; unstage' EXIT\n"
    ) in text
    # the MIOpen folders the script made go with the job, in the same (only) trap
    assert (
        'remove_node_dirs() { srun --ntasks="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 rm -rf '
        '"$MIOPEN_USER_DB_PATH" "$MIOPEN_CUSTOM_CACHE_DIR" || true; }\n'
    ) in text
    assert text.count("\ntrap ") == 1
    assert (
        "#   - partition small-g (part of a node): the first of the site's that fits; skipped "
        "standard-g: whole nodes only" in text
    )
    assert "memory 120G: 60 GB per GPU (slurm.mem: per_gpu)" in text
    assert "# Written by hpc-ml-containers" in text and "--account project_465000001" in text
    assert "Your project" not in text  # the account is there
    assert plan.summary() == (
        "lumi: small-g, 1 node(s), 2 GPU(s)/node, 2 task(s)/node x 7 cores, mem 120G, launch srun"
    )  # srun: LUMI's own default


@pytest.mark.parametrize("target, site", [("cpu", "local"), ("lumi-rocm", "lumi"), ("v100-cuda", "jean-zay-v100")])
def test_every_script_passes_its_cores_to_srun_and_its_output_unbuffered(tree, target, site):
    # Slurm 22.05 and newer: a step's srun does not take --cpus-per-task from the job
    plan, text = make(tree, target, site=site, launch="torchrun")
    cores = sbatch_lines(text)["cpus-per-task"]
    lines = text.splitlines()
    assert f'export SRUN_CPUS_PER_TASK="${{SLURM_CPUS_PER_TASK:-{cores}}}"' in lines
    assert "export PYTHONUNBUFFERED=1" in lines
    first_srun = next(i for i, line in enumerate(lines) if line.startswith("srun"))
    assert lines.index("export PYTHONUNBUFFERED=1") < first_srun


# --- what a script loads, and where it finds the wrapper and the image (issue 31) -----------


def prelude(text):
    """The script up to its launch lines: what runs before any srun."""
    return text[: text.rindex("\n\n")] + "\n"


def run_prelude(text, tmp_path, env=None, module=True):
    """The script's set-up in bash, with a `module` that records what it is asked."""
    script = tmp_path / "prelude.sh"
    script.write_text(prelude(text))
    setup = 'module() { echo "module $*" >> "$MODULE_LOG"; }; export -f module; ' if module else ""
    return subprocess.run(
        ["bash", "-c", f'{setup}exec bash "$0"', str(script)],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "MODULE_LOG": str(tmp_path / "modules.log"), **(env or {})},
    )


def test_jean_zay_scripts_load_singularity_and_take_the_image_from_the_allowed_folder(tree, tmp_path):
    """Problem 1: nothing loaded singularity, and the image path was images/<target>.sif, which
    Jean Zay will not run; a variable given in --image was written single-quoted."""
    for site, target in (("jean-zay", "a100-cuda"), ("jean-zay-v100", "v100-cuda"), ("jean-zay-h100", "h100-cuda")):
        _, text = make(tree, target, site=site, launch="srun")
        assert "module purge\nmodule load singularity\n" in text
        assert f'export SING_IMAGE="${{SINGULARITY_ALLOWED_DIR}}"/{target}.sif\n' in text
    _, text = make(tree, "a100-cuda", site="jean-zay", image="$SINGULARITY_ALLOWED_DIR/my model.sif", wrapper=WRAPPER)
    assert "export SING_IMAGE=\"${SINGULARITY_ALLOWED_DIR}\"'/my model.sif'\n" in text
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "my model.sif").write_bytes(b"image")
    ran = run_prelude(text, tmp_path, env={"SINGULARITY_ALLOWED_DIR": str(allowed)})
    assert ran.returncode == 0, ran.stderr
    assert (tmp_path / "modules.log").read_text() == "module purge\nmodule load singularity\n"


def test_a_missing_image_stops_the_job_with_one_line_before_any_step(tree, tmp_path):
    _, text = make(tree, "a100-cuda", site="jean-zay", launch="srun")
    ran = run_prelude(text, tmp_path, env={"SINGULARITY_ALLOWED_DIR": str(tmp_path / "allowed")})
    assert ran.returncode == 2
    assert ran.stderr == (
        f"error: no image at '{tmp_path}/allowed/a100-cuda.sif' (copy it into "
        f"{tmp_path}/allowed first: idrcontmgr cp a100-cuda.sif)\n"
    )


def test_a_job_shell_without_module_is_one_line(tree, tmp_path):
    _, text = make(tree, "a100-cuda", site="jean-zay", launch="srun")
    ran = run_prelude(text, tmp_path, module=False)
    assert ran.returncode == 2 and ran.stderr.count("\n") == 1
    assert "has no 'module' command" in ran.stderr


def test_the_default_wrapper_is_this_installs_by_its_absolute_path(tree, tmp_path):
    """Problem 2: `singularity_wrapper` was on PATH only for a user who had loaded a module."""
    plan = jobscript.plan(tree, "cpu", Request(program=("train.py",)))
    assert plan.environment.wrapper == WRAPPER
    text = jobscript.script(plan)
    assert f"{WRAPPER} exec torchrun" in launch_line(text)
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "cpu.sif").write_bytes(b"image")
    ran = run_prelude(text, tmp_path)
    assert ran.returncode == 0, ran.stderr
    missing = run_prelude(text.replace(WRAPPER, "/nowhere/singularity_wrapper"), tmp_path)
    assert missing.returncode == 2
    assert missing.stderr == (
        "error: /nowhere/singularity_wrapper not found (load the module that provides "
        "it, or give jobscript --wrapper)\n"
    )


def published_record(folder, **fields):
    version = folder / "pytorch" / "2.9-cpu"
    version.mkdir(parents=True)
    record = {"name": "pytorch", "version": "2.9-cpu", "target": "cpu", "site": "local", **fields}
    (version / "publish.json").write_text(json.dumps(record))
    return version


def test_a_published_version_is_loaded_by_the_script(tree, tmp_path):
    version = published_record(tmp_path / "prefix")
    plan, text = make(tree, "cpu", published=str(version), wrapper="")
    assert plan.environment.wrapper == "singularity_wrapper"
    assert f"module use {tmp_path}/prefix/modulefiles\nmodule load pytorch/2.9-cpu\n" in text
    assert "SING_IMAGE=" not in text  # the module sets it
    assert "singularity_wrapper exec torchrun" in launch_line(text)
    assert "--published" in text.splitlines()[2]  # the command that wrote it


@pytest.mark.parametrize(
    "fields, message",
    [
        (
            {"target": "a100-cuda", "site": "karolina"},
            "pytorch/2.9-cpu is a100-cuda for karolina; this script is cpu on local",
        ),
        ({"name": None}, "is not a publish record (publish.json with name, version, target and site)"),
    ],
)
def test_a_published_version_of_another_image_is_one_line(tmp_path, fields, message):
    version = published_record(tmp_path / "prefix", **fields)
    result = run_here("jobscript", "cpu", "--published", version, "--", "train.py")
    assert result.returncode == 2 and result.stdout == "" and result.stderr.count("\n") == 1
    assert message in result.stderr


def test_no_publish_record_is_one_line(tmp_path):
    result = run_here("jobscript", "cpu", "--published", tmp_path / "nothing", "--", "train.py")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "no publish record there; expected the folder PREFIX/NAME/VERSION" in result.stderr


def test_karolina_starts_mpi_ranks_with_the_hosts_mpirun_after_loading_it(tree):
    """Problem 5: Karolina's mpirun mode was srun --mpi=pmix, which no source confirms there."""
    plan, text = make(tree, "a100-cuda", site="karolina", nodes=2, launch="mpirun")
    assert "module load OpenMPI/5.0.3-GCC-13.3.0\n" in text and "module purge" not in text
    assert launch_line(text).startswith('mpirun -np "$SLURM_NTASKS" --map-by ppr:8:node ')
    # the other launch modes need no host MPI
    _, text = make(tree, "a100-cuda", site="karolina", nodes=2, launch="srun")
    assert not re.search(r"^module ", text, re.M) and "--mpi=" not in launch_line(text)


# --- issue 33: LUMI's rendezvous settings with their srun option; MIOpen's folders per job --


# HPE's shs-ccl-docs ccl_env.sh (2026-04); alt_read needs `srun --network=disable_rdzv_get`
HPE_RDZV = {
    "FI_CXI_RDZV_PROTO": "alt_read",
    "FI_CXI_RDZV_EAGER_SIZE": "0",
    "FI_CXI_RDZV_THRESHOLD": "0",
    "FI_CXI_RDZV_GET_MIN": "0",
}


NETWORK = "--network=disable_rdzv_get"


def srun_calls(text):
    """Every srun the script runs, from the word to the end of its line (comments left out)."""
    return [
        found.group(0)
        for line in text.splitlines()
        if not line.lstrip().startswith("#")
        for found in re.finditer(r"\bsrun\b.*", line)
    ]


def launch_block(text):
    """What the script runs after its checks: the lines after its last blank line."""
    return text[text.rindex("\n\n") + 2 :]


@pytest.mark.parametrize("launch", LAUNCHES)
def test_every_srun_of_a_lumi_multi_node_script_carries_the_option_hpes_rdzv_settings_need(tree, launch):
    _, text = make(tree, "lumi-rocm", nodes=2, launch=launch, stage=("/scratch/p/ds",))
    calls = srun_calls(text)
    assert len(calls) == 4, text  # MIOpen's folders made and removed, the unstage trap, the launch
    assert all(call.startswith(f"srun {NETWORK} ") for call in calls), calls
    assert (
        f"#   - srun {NETWORK} on every step: the site's multi-node settings need it (multi_node.srun_options)\n"
    ) in text
    # the settings that need it reach the ranks through the wrapper (HPCML_SITE=lumi) on jobs of
    # more than one node: the jobs whose scripts carry the option
    assert "export HPCML_SITE=lumi\n" in text
    lumi = tree.sites["lumi"]
    assert {name: value for name, value in lumi.multi_node.env if name.startswith("FI_CXI_RDZV_")} == HPE_RDZV
    assert not [name for name, _ in lumi.env if name.startswith("FI_CXI_RDZV_")]  # never baked into the image
    settings = (ROOT / "wrappers" / "sites" / "lumi.sh").read_text()
    multi_node_env = re.search(r"^HPCML_MULTI_NODE_ENV=\((.*)\)$", settings, re.M).group(1).split(" ")
    assert [f"{name}={value}" for name, value in HPE_RDZV.items()] == multi_node_env[-4:]


@pytest.mark.parametrize("launch", LAUNCHES)
def test_a_one_node_lumi_script_carries_no_srun_option_as_its_ranks_get_no_rdzv_settings(tree, launch):
    _, text = make(tree, "lumi-rocm", launch=launch)
    calls = srun_calls(text)
    assert len(calls) == 3 and "--network" not in text, text  # MIOpen's folders made and removed, the launch
    assert all(
        call.startswith(("srun --kill-on-bad-exit=1 ", 'srun --ntasks="$SLURM_JOB_NUM_NODES" ')) for call in calls
    )


def test_only_the_multi_node_scripts_of_a_site_that_asks_carry_srun_options(tree):
    """Every script of every site: each srun starts with the site's multi_node.srun_options on
    more than one node, with none on one node; sites without them (all but LUMI) are unchanged."""
    checked = set()
    for name, text in every_script(tree):
        _, site_name, _, nodes = name.rsplit(".", 3)
        site = tree.sites[site_name]
        options = site.multi_node.srun_options if nodes == "2" else ()
        if not options:
            assert "--network" not in text, name
        assert all(call.startswith(" ".join(["srun", *options]) + " ") for call in srun_calls(text)), name
        assert ("mkdir -p" in text) == bool(site.scratch.make_dirs), name
        checked.add((bool(options), bool(site.scratch.make_dirs)))
    assert checked == {(True, True), (False, True), (False, False)}


def test_the_hosts_mpirun_across_nodes_is_refused_where_every_step_needs_an_srun_option(tmp_path):
    """The host's mpirun starts ranks without srun's options, while the wrapper would still set
    the multi-node settings that need them: one line instead of a script that mixes the two."""
    recipes = tmp_path / "recipes"
    shutil.copytree(ROOT / "recipes", recipes)
    karolina = recipes / "sites" / "karolina.yaml"
    karolina.write_text(karolina.read_text() + f"multi_node:\n  srun_options: [{NETWORK}]\n")
    tree = RecipeTree(recipes)
    with pytest.raises(RecipeError) as raised:
        make(tree, "a100-cuda", site="karolina", nodes=2, launch="mpirun")
    assert str(raised.value) == (
        f"command line: --launch mpirun on 2 nodes: the host's mpirun starts the ranks without srun {NETWORK}, "
        "which karolina's multi-node jobs need (multi_node.srun_options); use --launch srun"
    )
    assert launch_line(make(tree, "a100-cuda", site="karolina", launch="mpirun")[1]).startswith("mpirun ")
    assert launch_line(make(tree, "a100-cuda", site="karolina", nodes=2, launch="srun")[1]).startswith(
        f"srun {NETWORK} --kill-on-bad-exit=1 "
    )


def run_launch_block(text, tmp_path, **env):
    """The script's launch lines in bash -euo pipefail, with srun and scontrol that record
    what they were asked: the srun calls in the order the job would make them, and the
    variables each step hands the container (APPTAINERENV_*, SINGULARITYENV_*)."""
    tmp_path.mkdir(exist_ok=True)
    script = tmp_path / "launch.sh"
    script.write_text(launch_block(text))
    fakes = (
        'srun() { echo "srun $*"; env | grep -E "^(APPTAINER|SINGULARITY)ENV_" | sort | sed "s/^/  /"; } >> "$CALLS"; '
        'scontrol() { echo n1; }; export -f srun scontrol; exec bash -euo pipefail "$0"'
    )
    calls = tmp_path / "calls"
    ran = subprocess.run(
        ["bash", "-c", fakes, str(script)],
        capture_output=True,
        text=True,
        timeout=30,
        env={
            "PATH": "/usr/bin:/bin",
            "CALLS": str(calls),
            "SLURM_JOB_NUM_NODES": "2",
            "SLURM_JOB_NODELIST": "n[1-2]",
            **env,
        },
    )
    assert ran.returncode == 0, ran.stderr
    return calls.read_text()


def test_lumi_scripts_make_miopens_per_job_folders_on_every_node_and_hand_them_to_the_container(tree, tmp_path):
    """MIOpen's SQLite caches fail on Lustre (node-local /tmp), and ranks that each made the
    folders raced (LUMI-AI-Guide PR #108): one task a node makes them first, one pair per job.
    The image cannot name them per job (the runtime evaluates its environment without the
    host's variables: tests/wrappers/test_wrapper.py), so the script hands the container the
    values it expands."""
    lumi = tree.sites["lumi"]
    assert lumi.dirs_to_make == (
        ("MIOPEN_USER_DB_PATH", "/tmp/${USER}-${SLURM_JOB_ID:-nojob}-miopen-db"),
        ("MIOPEN_CUSTOM_CACHE_DIR", "/tmp/${USER}-${SLURM_JOB_ID:-nojob}-miopen-cache"),
    )
    folders = "/tmp/alice-4242-miopen-db /tmp/alice-4242-miopen-cache"
    handed = "".join(
        f"  {runtime}ENV_{name}=/tmp/alice-4242-{kind}\n"
        for runtime in ("APPTAINER", "SINGULARITY")
        for name, kind in (("MIOPEN_CUSTOM_CACHE_DIR", "miopen-cache"), ("MIOPEN_USER_DB_PATH", "miopen-db"))
    )
    for nodes, launch in itertools.product((1, 2), LAUNCHES):
        _, text = make(tree, "lumi-rocm", nodes=nodes, launch=launch)
        option = f"{NETWORK} " if nodes > 1 else ""
        calls = run_launch_block(text, tmp_path / f"{nodes}-{launch}", USER="alice", SLURM_JOB_ID="4242")
        made = f"srun {option}--ntasks=2 --ntasks-per-node=1 mkdir -p {folders}\n"
        assert calls.startswith(made + handed), calls
        launched = calls[len(made + handed) :]
        assert launched.startswith(f"srun {option}--kill-on-bad-exit=1 ") and launched.endswith("\n" + handed), calls
        assert (
            "#   - MIOPEN_USER_DB_PATH, MIOPEN_CUSTOM_CACHE_DIR (scratch.make_dirs): made on every node before "
            "the ranks start, so that no two ranks race to make them, and removed when the script ends\n"
        ) in text
    # set -u does not stop a job whose shell has no USER
    calls = run_launch_block(text, tmp_path / "no-user", SLURM_JOB_ID="7")
    assert calls.startswith(
        f"srun {NETWORK} --ntasks=2 --ntasks-per-node=1 mkdir -p /tmp/-7-miopen-db /tmp/-7-miopen-cache\n"
    )


def test_nccl_net_gdr_level_is_never_set(tree):
    """LAIF issue #30: PHB or SYS hangs ROCm 7 images, and ROCm's default is right. No site
    sets it, nor any job script, the wrapper, its site settings or a rendered image."""
    for site in tree.sites.values():
        assert "NCCL_NET_GDR_LEVEL" not in dict((*site.env, *site.multi_node.env)), site.name
    texts = dict(every_script(tree))
    for path in [
        ROOT / "wrappers" / "singularity_wrapper",
        *(ROOT / "wrappers" / "sites").glob("*.sh"),
        *(ROOT / "containers").glob("*.def"),
    ]:
        texts[str(path.relative_to(ROOT))] = path.read_text()
    assert len(texts) > 60 and any(name.startswith("containers/") for name in texts)
    assert [name for name, text in texts.items() if "NCCL_NET_GDR_LEVEL" in text] == []
