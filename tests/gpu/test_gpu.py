"""`make test-gpu`: prove a CUDA target on a GPU host that has a Python with torch and nvcc, but
no Apptainer and no network (a site's GPU node, a borrowed GPU box).

From the bundle `make gpu-bundle` made (tests/helpers/gpu_bundle.py) it builds DeepSpeed's ops
as the target's image does (the pinned sdist, the image's DS_BUILD_* switches and arch list,
the CPU baseline stand-in, the libcuda link stub), in the background from the first test on,
and runs, in this order, each check against the time budget (--gpu-budget):

1. the host: GPU, driver, torch, NCCL, nvcc; a venv over the host's packages with what the
   host lacks installed from the bundle's wheels;
2. the smoke suite's preflight with another arch's image facts: it must fail;
3. the examples that need no DeepSpeed, one rank on the GPU under torchrun, then resumed
   (while the ops compile);
4. the ops: the wheel built, installed, every selected op prebuilt;
5. `python -m smoke all` with the target's image facts and its first site's facts;
6. ds_zero.py, one rank, then resumed;
7. DeepSpeed's own tests of each selected op, cheapest first, each in a share of what is left;
8. the frameworks' examples under DeepSpeed, one rank, then resumed;
9. nothing compiled at run time (TORCH_EXTENSIONS_DIR stayed empty).

Each writes one row of the summary (helpers/gpu_summary.py): PASS, FAIL, SKIP or NOT RUN, with why.
`--gpu-dry` needs no GPU: it checks the plan and the bundle and prints each command instead.
`--gpu-ops 2/3` (or a list) builds and tests part of the promised ops where all of them would
not fit the budget; the ops the examples and the smoke suite's engines need are always built.
"""

import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers.gpu_bundle import sha256

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
RUNTIME = ROOT / "runtime"
# built in every run: FusedAdam for ds_zero.py and the DeepSpeed configs, DeepSpeedCPUAdam for
# the smoke suite's engines with offload
ALWAYS_BUILT = ("cpu_adam", "fused_adam", "utils")
# seconds one op's DeepSpeed tests may take at most (the transformer's spawn a process a test)
OP_TESTS_CAP = 120
# seconds kept back at every step for what must come after it (the summary, the last check)
RESERVE = 20

# (id, arguments, the option a second run raises and to what, what it says it resumed from,
# whether it needs DeepSpeed)
EXAMPLE_CASES = [
    (
        "ddp_cnn",
        ("ddp_cnn.py", "--epochs", "2", "--samples", "4096", "--resume"),
        ("--epochs", "3"),
        r"resumed from checkpoints/last\.pt: epoch 3, step 0",
        False,
    ),
    (
        "lightning_ddp",
        ("lightning_ddp.py", "--accelerator", "gpu", "--epochs", "2", "--samples", "2048", "--resume"),
        ("--epochs", "3"),
        r"resumed from \S*checkpoints-lightning/last\.ckpt: epoch 3",
        False,
    ),
    (
        "hf_trainer",
        ("hf_trainer.py", "--steps", "20", "--save-every", "10", "--resume"),
        ("--steps", "30"),
        r"resumed from checkpoints-hf/checkpoint-20",
        False,
    ),
    (
        "accelerate_loop",
        ("accelerate_loop.py", "--steps", "20", "--save-every", "10", "--resume"),
        ("--steps", "30"),
        r"resumed from checkpoints-accelerate/step-20: step 20",
        False,
    ),
    (
        "ds_zero",
        ("ds_zero.py", "--epochs", "2", "--samples", "4096", "--resume"),
        ("--epochs", "3"),
        r"resumed from \S*checkpoints-ds/epoch2-step0",
        True,
    ),
    (
        "hf_trainer-deepspeed",
        ("hf_trainer.py", "--steps", "20", "--save-every", "10", "--resume", "--deepspeed", "DS_CONFIG_HF"),
        ("--steps", "30"),
        r"resumed from checkpoints-hf/checkpoint-20",
        True,
    ),
    (
        "accelerate_loop-zero2",
        ("accelerate_loop.py", "--steps", "20", "--save-every", "10", "--resume", "--zero-stage", "2"),
        ("--steps", "30"),
        r"resumed from checkpoints-accelerate/step-20: step 20",
        True,
    ),
]


# --- the plan, the bundle and the selection -------------------------------------------------------


@pytest.fixture(scope="session")
def options(request):
    get = request.config.getoption
    return {
        "target": get("--gpu-target"),
        "bundle": Path(get("--gpu-bundle")) / get("--gpu-target"),
        "ops": get("--gpu-ops"),
        "work": Path(get("--gpu-work")) / get("--gpu-target"),
        "dry": get("--gpu-dry"),
    }


@pytest.fixture(scope="session")
def plan(options):
    path = options["bundle"] / "plan.json"
    if not path.is_file():
        pytest.exit(
            f"make test-gpu: no {path}; make it where the recipes and an index are: "
            f"make gpu-bundle TARGET={options['target']}",
            returncode=2,
        )
    plan = json.loads(path.read_text())
    if plan.get("format") != 1 or plan.get("target") != options["target"]:
        pytest.exit(f"make test-gpu: {path} is not a plan for {options['target']} (format 1)", returncode=2)
    return plan


def select_ops(plan, choice):
    """(ops to build, ops whose tests run): the promised ops the choice names, plus ALWAYS_BUILT
    (built, not tested, unless chosen)."""
    promised = plan["deepspeed"]["promised_ops"]
    if choice == "all":
        chosen = list(promised)
    elif re.fullmatch(r"[0-9]+/[0-9]+", choice):
        part = int(choice.split("/")[0])
        chosen = [op for op in promised if (plan["op_tests"].get(op) or {}).get("part") == part]
    else:
        chosen = [op for op in choice.split(",") if op]
    unknown = [op for op in chosen if op not in promised]
    if unknown or not chosen:
        pytest.exit(f"--gpu-ops {choice}: {unknown or 'none'} not among {plan['target']}'s promised ops", returncode=2)
    built = sorted(set(chosen) | {op for op in ALWAYS_BUILT if op in promised})
    return built, chosen


@pytest.fixture(scope="session")
def ops(plan, options):
    return select_ops(plan, options["ops"])


@pytest.fixture(scope="session")
def work(options):
    work = options["work"]
    if not options["dry"]:
        for name in ("runs", "torch-extensions", "smoke"):
            shutil.rmtree(work / name, ignore_errors=True)
        (work / "torch-extensions").mkdir(parents=True)
    return work


@contextmanager
def check(summary, name, needs=0):
    """One row of the summary for the block inside: NOT RUN when fewer than `needs` seconds of the
    budget are left, FAIL on an assertion or error, SKIP on pytest.skip, PASS otherwise. The block
    may set row['detail'] and row['result']."""
    if summary.left() < needs + RESERVE:
        summary.add(name, "NOT RUN", 0, f"{summary.left():.0f} s of the budget left, {needs} s needed")
        pytest.skip(f"{name}: not run, the time budget is spent")
    row, started = {"detail": "", "result": "PASS"}, time.monotonic()
    try:
        yield row
    except pytest.skip.Exception as skipped:
        summary.add(name, "SKIP", time.monotonic() - started, str(skipped.msg))
        raise
    except BaseException as error:
        summary.add(name, "FAIL", time.monotonic() - started, row["detail"] or f"{type(error).__name__}: {error}"[:300])
        raise
    else:
        summary.add(name, row["result"], time.monotonic() - started, row["detail"])


def run(command, *, timeout, cwd=None, env=None, log=None):
    """(exit status, output) of a command, bounded in time; the output also goes to `log`."""
    try:
        done = subprocess.run(
            [str(part) for part in command],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=max(timeout, 1),
        )
        status, output = done.returncode, done.stdout
    except subprocess.TimeoutExpired as expired:
        out = expired.stdout or ""
        status, output = 124, (out.decode(errors="replace") if isinstance(out, bytes) else out)
    except FileNotFoundError as missing:  # nvidia-smi, say, not on this host's PATH
        status, output = 127, str(missing)
    if log:
        Path(log).parent.mkdir(parents=True, exist_ok=True)
        Path(log).write_text(output)
    return status, output


def tail(text, lines=15):
    return "\n".join(text.strip().splitlines()[-lines:])


# --- 1. the bundle and the host -------------------------------------------------------------------


def test_the_plan_and_the_bundle_are_complete(plan, options, ops, summary):
    with check(summary, "bundle") as row:
        built, tested = ops
        bundle = options["bundle"]
        missing = [op for op in plan["deepspeed"]["promised_ops"] if not plan["op_tests"].get(op)]
        assert not missing, f"deepspeed_op_tests.yaml has no entry for {missing}"
        for op in tested:
            entry = plan["op_tests"][op]
            assert entry.get("paths") or entry.get("reason"), f"{op}: neither tests nor a reason"
        for script in {case[1][0] for case in EXAMPLE_CASES}:
            assert (EXAMPLES / script).is_file(), script
        summary.facts.update(
            target=plan["target"],
            ops_built=", ".join(built),
            ops_tested=", ".join(tested),
            deepspeed=plan["deepspeed"]["version"],
            image_torch=plan["torch"]["version"],
        )
        if "sdist" not in plan["deepspeed"]:
            assert options["dry"], f"{bundle} holds a plan only; make gpu-bundle TARGET={plan['target']}"
            row["detail"] = "plan only (dry run)"
            return
        sdist = bundle / plan["deepspeed"]["sdist"]["file"]
        assert sha256(sdist) == plan["deepspeed"]["sdist"]["sha256"], f"{sdist}: not the file the plan names"
        for name, digest in plan["wheels"]:
            assert sha256(bundle / "wheels" / name) == digest, f"wheels/{name}: not the file the plan names"
        for deb in plan.get("debs", []):
            assert (bundle / "debs" / deb).is_file(), deb
        tests = plan["deepspeed_tests"]
        for op in tested:
            for path in plan["op_tests"][op].get("paths", ()):
                assert (bundle / "deepspeed-tests" / path).exists(), f"{op}: no {path} in the bundle's tests"
        summary.facts["deepspeed_tests"] = f"{tests['source']} (version.txt {tests['version']})"
        row["detail"] = f"{len(plan['wheels'])} wheels, DeepSpeed tests of {tests['version']}"


def find_nvcc():
    """nvcc on PATH, else CUDA_HOME's, /usr/local/cuda's or a pip cuda-toolkit's next to torch;
    its folder goes first on PATH and its parent becomes CUDA_HOME, as torch's extension build
    looks for them."""
    import sysconfig

    found = shutil.which("nvcc")
    if not found:
        candidates = [
            Path(os.environ.get("CUDA_HOME", "/nonexistent")) / "bin" / "nvcc",
            Path("/usr/local/cuda/bin/nvcc"),
        ]
        purelib = Path(sysconfig.get_paths()["purelib"])
        candidates += sorted(purelib.glob("nvidia/cu*/bin/nvcc")) + sorted(purelib.glob("nvidia/cuda_nvcc/bin/nvcc"))
        found = next((str(path) for path in candidates if path.is_file()), None)
    if found:
        folder = str(Path(found).resolve().parent)
        os.environ["PATH"] = f"{folder}:{os.environ['PATH']}"
        os.environ.setdefault("CUDA_HOME", str(Path(folder).parent))
    return found


@pytest.fixture(scope="session")
def host(options, summary):
    """What the host has: GPU, driver, torch, NCCL, nvcc."""
    if options["dry"]:
        return {}
    code = (
        "import json, torch\n"
        "ok = torch.cuda.is_available()\n"
        "print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda, 'gpus': torch.cuda.device_count(),\n"
        " 'device': torch.cuda.get_device_name(0) if ok else None,\n"
        " 'capability': '.'.join(map(str, torch.cuda.get_device_capability(0))) if ok else None,\n"
        " 'nccl': '.'.join(map(str, torch.cuda.nccl.version())) if ok else None,\n"
        " 'arch_list': torch.cuda.get_arch_list()}))\n"
    )
    status, output = run([sys.executable, "-c", code], timeout=120)
    facts = json.loads(output.strip().splitlines()[-1]) if status == 0 else {"error": tail(output, 5)}
    status, output = run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], timeout=30)
    facts["driver"] = output.strip().splitlines()[0] if status == 0 and output.strip() else None
    nvcc = find_nvcc()
    status, output = run([nvcc, "--version"], timeout=30) if nvcc else (1, "")
    facts["nvcc"] = re.search(r"release ([0-9.]+)", output).group(1) if status == 0 else None
    facts["cores"] = os.cpu_count()
    summary.facts.update({f"host_{key}": value for key, value in facts.items()})
    return facts


def test_the_host_has_a_gpu_torch_and_nvcc(host, options, plan, summary):
    with check(summary, "host") as row:
        if options["dry"]:
            row["result"], row["detail"] = "DRY", f"would check {sys.executable}'s torch, nvidia-smi and nvcc"
            return
        assert host.get("gpus"), f"torch sees no GPU: {host}"
        assert host.get("nvcc"), "no nvcc on PATH: DeepSpeed's CUDA ops cannot compile"
        wanted = set(plan["image_facts"]["gpu"]["archs"])
        row["detail"] = (
            f"{host['device']} (sm_{host['capability'].replace('.', '')}), driver {host['driver']}, torch "
            f"{host['torch']}, CUDA {host['cuda']}, NCCL {host['nccl']}, nvcc {host['nvcc']}; "
            f"image archs {sorted(wanted)}"
        )
        assert f"sm_{host['capability'].replace('.', '')}" in wanted, "this GPU is not among the image's archs"


# --- the environment and the DeepSpeed build ------------------------------------------------------


@pytest.fixture(scope="session")
def sysroot(plan, options, work):
    """Where the host lacks libaio: the bundle's Debian packages unpacked, and the variables
    that hand them to the op build, the ops' loading and DeepSpeed's run-time probe of libaio
    (it compiles and links a test program with CFLAGS and LDFLAGS). Empty where not needed."""
    debs = plan.get("debs", [])
    if options["dry"] or not debs or Path("/usr/include/libaio.h").exists():
        return {}
    root = work / "sysroot"
    shutil.rmtree(root, ignore_errors=True)
    for deb in debs:
        subprocess.run(["dpkg-deb", "-x", str(options["bundle"] / "debs" / deb), str(root)], check=True, timeout=60)
    include, libs = str(root / "usr" / "include"), sorted({str(path.parent) for path in root.rglob("lib*.so*")})
    return {
        "CPATH": ":".join(filter(None, [include, os.environ.get("CPATH")])),
        "LIBRARY_PATH": ":".join(filter(None, [*libs, os.environ.get("LIBRARY_PATH")])),
        "LD_LIBRARY_PATH": ":".join(filter(None, [*libs, os.environ.get("LD_LIBRARY_PATH")])),
        "CFLAGS": f"-I{include}",
        "LDFLAGS": " ".join(f"-L{folder}" for folder in libs),
    }


def build_script(plan, built, options, work):
    """The DeepSpeed step of the image's build, as a bash script: the same sdist, variables,
    CPU baseline and link stub; the jobs fitted to this host instead of the build machine."""
    ds = plan["deepspeed"]
    version, base = ds["version"], ds["cpu_baseline"]
    tmp = work / "deepspeed"
    lines = [
        "set -eu",
        f"rm -rf {tmp}; mkdir -p {tmp}/src {tmp}/wheel {tmp}/cpu {tmp}/stubs",
        f"tar -xzf {shlex.quote(str(options['bundle'] / f'deepspeed-{version}.tar.gz'))} -C {tmp}/src",
        f"cd {tmp}/src/deepspeed-{version}",
    ]
    if base["cpuinfo"]:
        lines += [
            "printf '%s\\n' 'def get_cpu_info():' "
            f"{shlex.quote('    return ' + base['cpuinfo'])} > {tmp}/cpu/cpuinfo.py",
            f"export PYTHONPATH={tmp}/cpu",
        ]
    if base["march"]:
        lines += [
            f"sed -i s/-march=native/{base['march']}/ op_builder/builder.py",
            f"python -c {shlex.quote(base['check'])} {base['march']} {base['simd']}",
        ]
    later = [var for op, var in ds["op_switches"].items() if var in ds.get("compiled_later", ()) and op in built]
    jobs = len(built) - len(later)
    cores = os.cpu_count() or 1
    per_op = max(1, min(8, math.ceil(2 * cores / jobs)))
    # as the image: ops made from another op's sources after the parallel pass, alone
    passes = [
        f"{' '.join(f'{var}=0' for var in later)} MAX_JOBS={per_op} python setup.py --quiet build_ext -j {jobs}",
        f"MAX_JOBS={cores} python setup.py --quiet build_ext bdist_wheel -d {tmp}/wheel",
    ]
    if not later:
        passes = [f"MAX_JOBS={per_op} python setup.py --quiet build_ext -j {jobs} bdist_wheel -d {tmp}/wheel"]
    lines += [
        f"gcc -shared -Wl,-soname,libcuda.so.1 -o {tmp}/stubs/libcuda.so -x c /dev/null",
        f'export LIBRARY_PATH="{tmp}/stubs${{LIBRARY_PATH:+:$LIBRARY_PATH}}"',
        'export LDFLAGS="-Wl,--as-needed${LDFLAGS:+ $LDFLAGS}"',  # the sysroot's -L, where there is one
        f'echo "compiling {jobs} DeepSpeed ops, {jobs} at a time, {per_op} files each; then {len(later)} alone"',
        *passes,
    ]
    return "\n".join(lines) + "\n"


def build_env(plan, built, sysroot):
    """The image build's variables, with the ops outside this run's selection switched off."""
    ds = plan["deepspeed"]
    env = dict(os.environ, **plan["env"], **ds["build_env"])
    for op, switch in ds["op_switches"].items():
        if op in ds["promised_ops"]:
            env[switch] = "1" if op in built else "0"
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    return {**env, **sysroot}


class Build:
    """The op compile, started once and waited for by whoever needs DeepSpeed."""

    def __init__(self, process, log, started):
        self.process, self.log, self.started, self.seconds = process, log, started, None
        self.installed = False  # the wheel built, installed, every chosen op prebuilt

    def wait(self, timeout):
        if self.seconds is None:
            try:
                self.process.wait(timeout=max(timeout, 1))
            except subprocess.TimeoutExpired:
                return None
            self.seconds = time.monotonic() - self.started
        return self.process.returncode


@pytest.fixture(scope="session")
def deepspeed_build(plan, options, ops, work, sysroot, host, summary):
    if options["dry"]:
        print(build_script(plan, ops[0], options, work))
        return None
    work.mkdir(parents=True, exist_ok=True)
    script, log = work / "build-deepspeed.sh", work / "build-deepspeed.log"
    script.write_text(build_script(plan, ops[0], options, work))
    process = subprocess.Popen(
        ["bash", str(script)],
        env=build_env(plan, ops[0], sysroot),
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return Build(process, log, time.monotonic())


def over_the_hosts_packages(path):
    """A venv that sees this Python's packages after its own: a .pth adds this Python's
    site-packages folders (--system-site-packages would show only the base interpreter's, and
    the host's Python with torch is often a venv itself)."""
    status, output = run([sys.executable, "-m", "venv", path], timeout=120)
    assert status == 0, output
    status, output = run([path / "bin" / "python", "-c", "import site; print(site.getsitepackages()[0])"], timeout=60)
    assert status == 0, output
    own = Path(output.strip().splitlines()[-1])
    host = [p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and Path(p).is_dir()]
    # addsitedir, not a bare path: the host's own .pth files run too (setuptools' distutils shim,
    # which DeepSpeed's run-time probe of libaio compiles with)
    (own / "zz-host-packages.pth").write_text("".join(f"import site; site.addsitedir({folder!r})\n" for folder in host))


@pytest.fixture(scope="session")
def venv(plan, options, work, summary, deepspeed_build):
    """A venv over the host's packages, with what the host lacks from the bundle's wheels."""
    path = work / "venv"
    python = path / "bin" / "python"
    pip = [
        python, "-m", "pip", "install", "--quiet", "--no-index", "--no-compile", "--disable-pip-version-check",
        "--find-links", options["bundle"] / "wheels",
    ]  # fmt: skip
    # DeepSpeed's own needs first, the frameworks apart: a framework the host cannot take
    # (an old pyarrow under datasets) then leaves DeepSpeed and the smoke suite their run
    frameworks = [f"{name}=={version}" for name, version in plan["frameworks"].items()]
    requirements = plan.get("requirements", [])
    groups = [[r for r in requirements if r not in frameworks], [r for r in requirements if r in frameworks]]
    command = [*pip, *requirements]
    if options["dry"]:
        return {"python": python, "command": command}
    shutil.rmtree(path, ignore_errors=True)
    over_the_hosts_packages(path)
    status, output = 0, ""
    for number, group in enumerate(groups, start=1):
        done, said = run([*pip, *group], timeout=300, log=work / f"pip-install-{number}.log")
        status, output = max(status, done), output + said
    plugins = []
    for module, arguments in (("xdist", ("-n", "4")), ("pytest_timeout", ("--timeout", "300"))):
        if run([python, "-c", f"import {module}"], timeout=60)[0] == 0:
            plugins += arguments  # four at a time, as DeepSpeed's CI runs its unit tests; a hung test ends
    return {"python": python, "status": status, "output": output, "command": command, "pytest_plugins": plugins}


def test_a_venv_gets_what_the_host_lacks_from_the_bundle(venv, options, plan, summary):
    with check(summary, "venv", needs=30) as row:
        if options["dry"]:
            row["result"], row["detail"] = "DRY", shlex.join(map(str, venv["command"]))
            return
        assert venv["status"] == 0, f"pip from the bundle's wheels: {tail(venv['output'], 8)}"
        names = ["torch", "transformers", "accelerate", "lightning", "datasets", "pydantic", "mpi4py"]
        code = "import importlib.metadata as m, json, sys\nprint(json.dumps({n: m.version(n) for n in sys.argv[1:]}))"
        status, output = run([venv["python"], "-c", code, *names], timeout=60)
        assert status == 0, output
        found = json.loads(output.strip().splitlines()[-1])
        summary.facts["python_packages"] = ", ".join(f"{name} {version}" for name, version in found.items())
        differ = [
            f"{n} {found[n]} (image {plan['frameworks'][n]})"
            for n in plan["frameworks"]
            if found[n] != plan["frameworks"][n]
        ]
        row["detail"] = f"torch {found['torch']} (image {plan['torch']['version']})" + (
            "; frameworks differ: " + ", ".join(differ) if differ else "; frameworks as the image pins"
        )


# --- runs ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def base_env(work, sysroot):
    """Every run's environment: no launcher's variables, JIT builds where the last check looks."""
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(work / "torch-extensions"), PYTHONUNBUFFERED="1", **sysroot)
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "PYTHONPATH"):
        env.pop(name, None)
    return env


def torchrun(venv, *args):
    return [venv["python"], "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1", *args]


def facts_file(work, name, facts):
    path = work / f"{name}.json"
    path.write_text(json.dumps(facts, indent=1) + "\n")
    return path


def test_preflight_refuses_the_image_facts_of_another_gpu_arch(venv, plan, options, base_env, work, summary):
    other = plan["other_arch"]
    with check(summary, f"preflight with {other['target']}'s facts (must fail)", needs=30) as row:
        facts = work / "other-arch.json"
        command = torchrun(venv, "-m", "smoke", "preflight", "--image-facts", facts, "--out", work / "smoke-other")
        if options["dry"]:
            row["result"], row["detail"] = "DRY", shlex.join(map(str, command))
            return
        facts_file(work, "other-arch", other["image_facts"])
        status, output = run(
            command, timeout=min(120, summary.left() - RESERVE), cwd=work,
            env={**base_env, "PYTHONPATH": str(RUNTIME)}, log=work / "runs" / "preflight-other.log",
        )  # fmt: skip
        failed = [line for line in output.splitlines() if re.search(r"\bFAIL\b", line)]
        row["detail"] = failed[0].strip()[:200] if failed else tail(output, 3)
        assert status == 1 and failed, f"preflight with {other['archs']} facts must fail (exit 1): {tail(output)}"


def example_command(args):
    return [EXAMPLES / args[0], *(str(EXAMPLES / "ds_config_hf.json") if a == "DS_CONFIG_HF" else a for a in args[1:])]


def example_check(case, venv, options, base_env, work, summary):
    """The example's row: its command in a dry run, else the two runs of run_example."""
    with check(summary, f"example {case[0]} (+ resume)", needs=60) as row:
        if options["dry"]:
            row["result"], row["detail"] = "DRY", shlex.join(map(str, torchrun(venv, *example_command(case[1]))))
            return
        row["detail"] = run_example(case, venv, base_env, work, summary)


def run_example(case, venv, base_env, work, summary):
    """Two runs in one folder, one rank on the GPU: the first, then the same with more steps,
    which must go on from the first's checkpoint."""
    name, args, more, resumed, _ = case
    folder = work / "runs" / name
    folder.mkdir(parents=True, exist_ok=True)
    second = list(args)
    second[second.index(more[0]) + 1] = more[1]
    seconds, outputs = [], []
    for number, arguments in enumerate((args, second), start=1):
        started = time.monotonic()
        status, output = run(
            torchrun(venv, *example_command(arguments)), timeout=min(240, summary.left() - RESERVE),
            cwd=folder, env=base_env, log=folder / f"run{number}.log",
        )  # fmt: skip
        seconds.append(time.monotonic() - started)
        outputs.append(output)
        assert status == 0, f"run {number} exited {status}: {tail(output)}"
    assert re.search(resumed, outputs[1]), f"the second run did not resume: {tail(outputs[1])}"
    script = args[0][:-3]
    header = next((line for line in outputs[0].splitlines() if line.startswith(f"{script}: ")), "")
    assert header, f"{script} did not say where it trains: {tail(outputs[0])}"
    return f"{seconds[0]:.0f} s + resumed {seconds[1]:.0f} s; {header[:200]}"


@pytest.mark.parametrize("case", [c for c in EXAMPLE_CASES if not c[4]], ids=lambda c: c[0])
def test_an_example_trains_on_the_gpu_and_resumes(case, venv, options, base_env, work, summary):
    example_check(case, venv, options, base_env, work, summary)


def test_deepspeed_builds_its_ops_as_the_image_does(deepspeed_build, venv, plan, ops, options, base_env, work, summary):
    built, _ = ops
    with check(summary, "DeepSpeed ops built", needs=60) as row:
        if options["dry"]:
            row["result"], row["detail"] = "DRY", f"would compile {', '.join(built)} (bash build-deepspeed.sh)"
            return
        status = deepspeed_build.wait(summary.left() - RESERVE)
        log = deepspeed_build.log.read_text()
        assert status is not None, f"the ops were still compiling when the budget ran out: {tail(log, 5)}"
        assert status == 0, f"the op build failed: {tail(log)}"
        wheel = next((work / "deepspeed" / "wheel").glob("deepspeed-*.whl"))
        status, output = run(
            [venv["python"], "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--force-reinstall", wheel],
            timeout=120,
        )
        assert status == 0, output
        if plan["deepspeed"]["fix_master_address"]:
            code = (
                "import importlib.util, os; "
                "print(os.path.join(os.path.dirname(importlib.util.find_spec('deepspeed').origin), 'comm', 'comm.py'))"
            )
            comm = Path(run([venv["python"], "-c", code], timeout=60)[1].strip().splitlines()[-1])
            comm.write_text(comm.read_text().replace("hostname -I", "hostname -s"))
        code = (
            "import json, deepspeed.git_version_info as g\n"
            "print(json.dumps(sorted(op for op, done in g.installed_ops.items() if done)))"
        )
        status, output = run([venv["python"], "-c", code], timeout=120, env=base_env)
        assert status == 0, output
        installed = json.loads(output.strip().splitlines()[-1])
        missing = sorted(set(built) - set(installed))
        row["detail"] = f"{deepspeed_build.seconds:.0f} s for {len(built)} ops; installed: {', '.join(installed)}"
        assert not missing, f"not prebuilt: {missing}"
        deepspeed_build.installed = True


@pytest.fixture
def deepspeed_ready(deepspeed_build, options):
    """Skips a test when the op build did not pass (its own row says why)."""
    if not options["dry"] and not deepspeed_build.installed:
        pytest.skip("the DeepSpeed ops were not built")


def test_the_smoke_suite_passes_with_the_images_and_a_sites_facts(
    deepspeed_ready, venv, plan, ops, options, base_env, work, summary
):
    built, _ = ops
    with check(summary, f"smoke all ({plan['target']} image facts, {plan['site']} site facts)", needs=60) as row:
        facts = dict(plan["image_facts"])
        promised = [op for op in facts["deepspeed"]["promised_ops"] if op in built]
        facts["deepspeed"] = dict(facts["deepspeed"], promised_ops=promised)
        command = torchrun(
            venv, "-m", "smoke", "all", "--image-facts", work / "image-facts.json",
            "--site-facts", work / "site-facts.json", "--out", work / "smoke",
        )  # fmt: skip
        if options["dry"]:
            row["result"], row["detail"] = "DRY", shlex.join(map(str, command))
            return
        facts_file(work, "image-facts", facts)
        facts_file(work, "site-facts", plan["site_facts"])
        status, output = run(
            command, timeout=min(300, summary.left() - RESERVE), cwd=work,
            env={**base_env, "PYTHONPATH": str(RUNTIME)}, log=work / "runs" / "smoke-all.log",
        )  # fmt: skip
        verdicts = [line.strip() for line in output.splitlines() if re.search(r"\b(PASS|FAIL|ERROR)\b", line)]
        row["detail"] = (
            f"{len(promised)} of {len(plan['image_facts']['deepspeed']['promised_ops'])} promised ops; "
            + ("; ".join(verdicts[-12:])[:600])
        )
        assert status == 0, f"smoke all exited {status}: {tail(output)}"


@pytest.mark.parametrize("case", [c for c in EXAMPLE_CASES if c[0] == "ds_zero"], ids=lambda c: c[0])
def test_a_deepspeed_example_trains_on_the_gpu_and_resumes(
    case, deepspeed_ready, venv, options, base_env, work, summary
):
    example_check(case, venv, options, base_env, work, summary)


# --- DeepSpeed's own tests --------------------------------------------------------------------------

PROGRESS = re.compile(r"^([.sFExX]+)\s*(\[\s*\d+%\])?$")
COUNTS = re.compile(r"(\d+) (passed|failed|skipped|error|errors|xfailed|xpassed|deselected)")


def counted(output):
    """{passed, failed, skipped, error}: from pytest's last line, or, when it was stopped before
    printing one, from its progress characters."""
    for line in reversed(output.splitlines()):
        if re.search(r"\b(passed|failed|skipped|error|errors|no tests ran)\b", line) and " in " in line:
            found = {word.rstrip("s"): int(number) for number, word in COUNTS.findall(line)}
            return {key: found.get(key, 0) for key in ("passed", "failed", "skipped", "error")}, True
    chars = "".join(m.group(1) for line in output.splitlines() if (m := PROGRESS.match(line.strip())))
    return {
        "passed": chars.count("."),
        "failed": chars.count("F"),
        "skipped": chars.count("s"),
        "error": chars.count("E"),
    }, False


def skip_reasons(output):
    reasons = {}
    for line in output.splitlines():
        found = re.match(r"SKIPPED \[(\d+)\] [^:]+:\d+: (.*)", line)
        if found:
            reasons[found.group(2)] = reasons.get(found.group(2), 0) + int(found.group(1))
    return reasons


def op_test_order(ops):
    """The chosen ops, cheapest first (the inference kernels' large grids last)."""
    last = ("ragged_ops", "inference_core_ops", "transformer_inference")
    return sorted(ops, key=lambda op: (op in last, last.index(op) if op in last else 0, op))


def pytest_generate_tests(metafunc):
    """One test per op this run chooses, from the plan (without one, the plan fixture stops the run)."""
    if "op" in metafunc.fixturenames:
        config = metafunc.config
        path = Path(config.getoption("--gpu-bundle")) / config.getoption("--gpu-target") / "plan.json"
        chosen = select_ops(json.loads(path.read_text()), config.getoption("--gpu-ops"))[1] if path.is_file() else []
        metafunc.parametrize("op", op_test_order(chosen))


def test_deepspeeds_own_tests_pass_for_a_prebuilt_op(
    op, deepspeed_ready, venv, plan, ops, options, base_env, work, summary
):
    _, chosen = ops
    entry = plan["op_tests"][op]
    with check(summary, f"DeepSpeed tests: {op}", needs=45) as row:
        if entry.get("reason"):
            row["result"], row["detail"] = "SKIP", entry["reason"] + "; the smoke suite's op check loads it"
            return
        tests = options["bundle"] / "deepspeed-tests"
        command = [
            venv["python"], "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", "-o", "addopts=",
            "-m", entry.get("markers", "not nightly"), *venv.get("pytest_plugins", ()), *entry["paths"],
        ]  # fmt: skip
        if entry.get("select"):
            command += ["-k", entry["select"]]
        if options["dry"]:
            row["result"], row["detail"] = "DRY", f"in {tests}: " + shlex.join(map(str, command))
            return
        remaining = [o for o in op_test_order(chosen) if plan["op_tests"][o].get("paths")]
        later = len(remaining) - remaining.index(op) - 1
        # an equal share of what is left for this op and each after it, the last takes the rest
        share = min(OP_TESTS_CAP, (summary.left() - RESERVE) / (later + 1))
        status, output = run(command, timeout=share, cwd=tests, env=base_env, log=work / "runs" / f"ds-{op}.log")
        counts, finished = counted(output)
        reasons = skip_reasons(output)
        row["detail"] = (
            ", ".join(f"{n} {k}" for k, n in counts.items() if n)
            + ("" if finished else f"; stopped after its {share:.0f} s share of the budget")
            + ("; skipped: " + "; ".join(f"{n}x {why}" for why, n in reasons.items()) if reasons else "")
        )[:700]
        assert counts["failed"] == 0 and counts["error"] == 0, f"{row['detail']}\n{tail(output, 30)}"
        assert counts["passed"] > 0, f"no test of {op} passed: {tail(output, 10)}"
        if not finished:
            row["result"] = "PART"


@pytest.mark.parametrize("case", [c for c in EXAMPLE_CASES if c[4] and c[0] != "ds_zero"], ids=lambda c: c[0])
def test_a_framework_example_under_deepspeed_trains_on_the_gpu_and_resumes(
    case, deepspeed_ready, venv, options, base_env, work, summary
):
    example_check(case, venv, options, base_env, work, summary)


def test_nothing_was_compiled_at_run_time(options, work, summary):
    with check(summary, "nothing compiled at run time") as row:
        if options["dry"]:
            row["result"], row["detail"] = "DRY", f"would list {work / 'torch-extensions'}"
            return
        found = sorted(str(path.relative_to(work)) for path in (work / "torch-extensions").rglob("*"))
        row["detail"] = f"{work / 'torch-extensions'}: " + (", ".join(found[:10]) if found else "empty")
        assert not found, "an op was compiled at run time (JIT)"
