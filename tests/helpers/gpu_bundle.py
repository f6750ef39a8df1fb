"""What `make test-gpu` needs on a GPU host that has a Python with torch and nvcc but no
Apptainer and no network: made here, where the recipes and the package index are, into a
git-ignored folder that travels with the checkout (`make gpu-bundle TARGET=h100-cuda`).

    .gpu-bundle/<target>/plan.json           what the image is: DeepSpeed's switches, the arch
                                             list, the image's and a site's facts, another
                                             arch's facts, the op tests, the files below
    .gpu-bundle/<target>/deepspeed-X.tar.gz  the pinned sdist the image compiles
    .gpu-bundle/<target>/deepspeed-tests/    DeepSpeed's tests/ (conftest, pytest.ini, unit/)
    .gpu-bundle/<target>/wheels/             what DeepSpeed and the frameworks need beyond
                                             torch, for the host's Python

The wheels are resolved with a stand-in torch of the image's version (torch and its CUDA
libraries are the host's own), and leave out the large libraries every torch host has
(numpy, pandas, pyarrow): the GPU run installs, into a venv over the host's packages, only
what the host lacks, and names what is missing if the host lacks one of those too.

    PYTHONPATH=tests python -m helpers.gpu_bundle h100-cuda [--out .gpu-bundle]
        [--python-version 3.12] [--deepspeed-tests URL|TARBALL|GITDIR[@REF]] [--plan-only]
"""

import argparse
import base64
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
import zipfile
from pathlib import Path

from helpers import deepspeed_source

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

OP_TESTS = ROOT / "tests" / "gpu" / "deepspeed_op_tests.yaml"
PLAN = "plan.json"
# every torch host has these; carried they would not fit the 64 MiB a GPU machine takes along
HOST_HAS = {"torch", "numpy", "pandas", "pyarrow"}
# what the examples and the smoke suite import beyond DeepSpeed's own requirements
EXTRA = ("mpi4py",)
TESTS_URL = "https://github.com/deepspeedai/DeepSpeed/archive/refs/tags/v{version}.tar.gz"
# the parts of DeepSpeed's tests/ folder its unit tests need
TEST_PARTS = ("conftest.py", "pytest.ini", "unit")


def die(text):
    """Bad input: one line, exit status 2, nothing written."""
    print(f"error: {text}", file=sys.stderr)
    raise SystemExit(2)


def other_arch_target(tree, target):
    """A CUDA target whose GPU archs share none of `target`'s: its facts must fail preflight."""
    for name in sorted(tree.targets):
        other = tree.target(name)
        if other.name != target.name and other.torch.flavour == "cuda" and not set(other.archs) & set(target.archs):
            return other
    die(f"no CUDA target with other GPU archs than {target.name}'s {list(target.archs)}")


def plan_for(name, python_version):
    """The plan: everything the GPU run needs to know about the image, from the recipes."""
    from builder.recipes.tree import RecipeTree
    from builder.render.blocks import deepspeed as deepspeed_block
    from builder.render.blocks import runtime
    from builder.render.blocks.torch import arch_env
    from builder.render.cpu_baseline import cpu_baseline

    tree = RecipeTree(ROOT / "recipes")
    target = tree.target(name)
    if target.torch.flavour != "cuda":
        die(f"{name}: make test-gpu proves CUDA targets; {name} is {target.torch.flavour}")
    resolved = target.resolved
    site = target.sites[0]
    other = other_arch_target(tree, target)
    import yaml  # here: the GPU host imports this module for sha256 alone

    op_tests = yaml.safe_load(OP_TESTS.read_text())["ops"]
    table = tree.ds_ops.data["ops"]
    # the DeepSpeed step's variables as the image's build sets them (DS_ACCELERATOR, DS_BUILD_*)
    build_env = next(dict(part.build_env) for part in deepspeed_block.parts(target) if part.stage == "build")
    return {
        "format": 1,
        "packages": list(target.deepspeed.packages),
        "target": target.name,
        "arch": target.arch,
        "python": python_version,
        "torch": resolved["torch"],
        "env": dict(arch_env(target)),
        "deepspeed": {
            **{key: resolved["deepspeed"][key] for key in ("version", "promised_ops", "skipped_ops")},
            "build_env": build_env,
            "op_switches": {op: table[op]["build_var"] for op in target.deepspeed.listed},
            "compiled_later": list(target.deepspeed.compiled_later),
            "fix_master_address": target.deepspeed.fix_master_address,
            "cpu_baseline": cpu_baseline(target.arch),
        },
        "frameworks": dict(target.python.frameworks),
        "image_facts": runtime.image_facts(target).to_json(),
        "site": site.name,
        "site_facts": site.smoke_facts.to_json(),
        "other_arch": {
            "target": other.name,
            "archs": list(other.archs),
            "image_facts": runtime.image_facts(other).to_json(),
        },
        "op_tests": {op: op_tests.get(op) for op in target.deepspeed.promised},
    }


def stand_in_torch(folder, version):
    """A wheel named torch at `version`, with nothing in it, for the resolver."""
    name = f"torch-{version}+standin"
    files = {
        f"{name}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}+standin\n".encode(),
        f"{name}.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: gpu_bundle\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = [
        f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
        for path, data in files.items()
    ]
    path = folder / f"{name}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for member, data in files.items():
            wheel.writestr(member, data)
        wheel.writestr(f"{name}.dist-info/RECORD", "\n".join([*record, f"{name}.dist-info/RECORD,,"]) + "\n")
    return f"{version}+standin"


def platform_options(python_version):
    tag = "cp" + python_version.replace(".", "")
    platforms = [f"manylinux_2_{n}_x86_64" for n in (28, 27, 24, 17, 12, 5)] + ["manylinux2014_x86_64", "linux_x86_64"]
    options = ["--python-version", python_version, "--implementation", "cp", "--abi", tag, "--abi", "abi3"]
    options += ["--abi", "none", "--only-binary=:all:"]
    for platform in platforms:
        options += ["--platform", platform]
    return options + ["--platform", "any"]


def pip(*args, cwd=None):
    done = subprocess.run([sys.executable, "-m", "pip", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"error: pip {' '.join(args[:2])} failed:\n{done.stderr[-3000:]}")
    return done


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def requirements(sdist):
    """DeepSpeed's install requirements, as its sdist lists them."""
    with tarfile.open(sdist) as archive:
        member = next(m for m in archive.getmembers() if m.name.endswith("/requirements/requirements.txt"))
        text = archive.extractfile(member).read().decode()
    return [line.split("#")[0].strip() for line in text.splitlines() if line.split("#")[0].strip()]


def fetch_wheels(plan, sdist, out):
    """Resolve DeepSpeed's requirements and the frameworks with a stand-in torch; download all
    but HOST_HAS. (file name, sha256) of each."""
    wanted = [r for r in requirements(sdist) if not r.startswith("torch")]
    wanted += [f"{name}=={version}" for name, version in plan["frameworks"].items()]
    wanted += list(EXTRA)
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        version = stand_in_torch(scratch, plan["torch"]["version"])
        report = scratch / "report.json"
        options = platform_options(plan["python"])
        pip(
            "install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(report), "--target",
            str(scratch / "t"), "--find-links", str(scratch), *options, f"torch=={version}", *wanted,
        )  # fmt: skip
        chosen = [
            (item["metadata"]["name"], item["metadata"]["version"])
            for item in json.loads(report.read_text())["install"]
            if canonical(item["metadata"]["name"]) not in HOST_HAS
        ]
    out.mkdir(parents=True, exist_ok=True)
    pip("download", "--no-deps", "-d", str(out), *options, *(f"{name}=={version}" for name, version in chosen))
    return wanted, sorted((path.name, sha256(path)) for path in out.glob("*.whl"))


def fetch_debs(packages, out):
    """The Debian packages the ops build with (libaio-dev) and the libraries they pull, for a
    GPU host that lacks them: unpacked there, never installed. File names."""
    from helpers.debs import downloaded

    wanted = set(packages)
    for package in packages:
        shown = subprocess.run(["apt-cache", "depends", package], capture_output=True, text=True, check=True).stdout
        wanted |= set(re.findall(r"^\s+Depends: (lib\S+)$", shown, re.M))
    out.mkdir(parents=True, exist_ok=True)
    for package in sorted(wanted):
        shutil.copy2(downloaded(package), out)
    return sorted(path.name for path in out.glob("*.deb"))


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def fetch_deepspeed_tests(source, version, out):
    """DeepSpeed's tests/ folder into `out`; the version its version.txt says."""
    source = source or TESTS_URL.format(version=version)
    out.mkdir(parents=True)
    git_dir, _, ref = source.partition("@")
    if Path(git_dir).is_dir():
        ref = ref or f"v{version}"
        paths = [f"tests/{part}" for part in TEST_PARTS] + ["version.txt"]
        data = subprocess.run(
            ["git", "--git-dir", git_dir, "archive", "--format=tar", ref, *paths], capture_output=True, check=True
        ).stdout
        described = f"{Path(git_dir).name} at {ref}"
    elif Path(source).is_file():
        data, described = Path(source).read_bytes(), Path(source).name
    else:
        with urllib.request.urlopen(source, timeout=120) as answer:
            data, described = answer.read(), source
    found = None
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        for member in archive.getmembers():
            parts = member.name.split("/")
            top = 0 if parts[0] in ("tests", "version.txt") else 1  # GitHub's archives have one folder above
            inner = parts[top:]
            if inner == ["version.txt"]:
                found = archive.extractfile(member).read().decode().strip()
            elif inner[:1] == ["tests"] and len(inner) > 1 and inner[1] in TEST_PARTS and member.isfile():
                target = out.joinpath(*inner[1:])
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.extractfile(member).read())
    if not (out / "unit").is_dir():
        raise SystemExit(f"error: {described}: no tests/unit in it")
    return {"source": described, "version": found}


def make(name, out, python_version, tests_source, plan_only):
    plan = plan_for(name, python_version)
    final = out / name
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=out))
    try:
        if not plan_only:
            sdist = Path(shutil.copy2(deepspeed_source.sdist(plan["deepspeed"]["version"], staging), staging))
            plan["deepspeed"]["sdist"] = {"file": sdist.name, "sha256": sha256(sdist)}
            plan["requirements"], plan["wheels"] = fetch_wheels(plan, sdist, staging / "wheels")
            plan["debs"] = fetch_debs(plan["packages"], staging / "debs")
            plan["deepspeed_tests"] = fetch_deepspeed_tests(
                tests_source, plan["deepspeed"]["version"], staging / "deepspeed-tests"
            )
        (staging / PLAN).write_text(json.dumps(plan, indent=1, sort_keys=True) + "\n")
        if final.exists():
            shutil.rmtree(final)
        os.replace(staging, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final, plan


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("target")
    parser.add_argument("--out", type=Path, default=ROOT / ".gpu-bundle")
    parser.add_argument("--python-version", default="3.12", help="the GPU host's Python (default 3.12)")
    parser.add_argument("--deepspeed-tests", help="URL, tarball or GITDIR[@REF] of DeepSpeed's tests")
    parser.add_argument("--plan-only", action="store_true", help="write plan.json alone (the dry run needs no more)")
    args = parser.parse_args(argv)
    if not re.fullmatch(r"3\.\d+", args.python_version):
        parser.exit(2, f"error: --python-version {args.python_version!r}: expected 3.N\n")
    args.out.mkdir(parents=True, exist_ok=True)
    final, plan = make(args.target, args.out, args.python_version, args.deepspeed_tests, args.plan_only)
    size = sum(path.stat().st_size for path in final.rglob("*") if path.is_file())
    print(f"{final}: {len(plan.get('wheels', []))} wheels, {size / 2**20:.1f} MiB")
    if "deepspeed_tests" in plan:
        tests = plan["deepspeed_tests"]
        print(f"DeepSpeed tests from {tests['source']} (version.txt {tests['version']})")
        if tests["version"] != plan["deepspeed"]["version"]:
            print(f"note: the tests are of {tests['version']}, the image's DeepSpeed is {plan['deepspeed']['version']}")


if __name__ == "__main__":
    main()
