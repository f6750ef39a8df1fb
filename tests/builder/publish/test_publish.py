"""`python -m builder publish` and `verify` with the real CPU image, loaded with the real
Lmod from Debian and with Environment Modules (Tcl) unpacked from its Debian package."""

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from conftest import run_builder
from helpers.cli_here import run_here
from helpers.publishing import LMOD_DIR, lmod, publish, tcl_module

from builder import runner
from builder.publish.modulefile import Module, render_entry, render_lua, render_tcl


@pytest.fixture
def prefix(tmp_path):
    path = tmp_path / "appl" / "ml"
    path.mkdir(parents=True)  # an admin's folder: publish makes none
    return path


@pytest.fixture
def published(smoked, prefix, apptainer):
    result = publish(smoked, prefix, "--version", "1.0", "--default", "--tcl", env={"HPCML_APPTAINER": apptainer})
    assert result.returncode == 0, result.stderr
    return prefix


def tree_state(prefix):
    """Every file and link under prefix with its content hash (hidden staging folders aside)."""
    state = {}
    for path in sorted(prefix.rglob("*")):
        relative = path.relative_to(prefix)
        if any(part.startswith(".") and part != ".version" for part in relative.parts):
            continue  # a killed publish's staging folder, the lock
        if path.is_symlink():
            state[str(relative)] = "-> " + os.readlink(path)
        elif path.is_file():
            state[str(relative)] = runner.run(["sha256sum", str(path)]).stdout.split()[0]
    return state


def test_module_load_then_python_runs_in_the_image(published, apptainer):
    result = lmod(
        "module load pytorch\n"
        'echo "image=$SING_IMAGE site=$HPCML_SITE"\n'
        "command -v python torchrun deepspeed pip\n"
        "python -c 'import sys, torch; print(torch.__version__, sys.prefix)'\n"
        "module unload pytorch\n"
        'echo "after=${SING_IMAGE:-unset}"\n',
        published,
        apptainer,
        PATH=os.environ["PATH"],
    )
    assert result.returncode == 0, result.stderr
    root = published / "pytorch" / "1.0"
    lines = result.stdout.splitlines()
    assert lines[0] == f"image={root}/image.sif site=local"
    assert lines[1:5] == [f"{root}/bin/{c}" for c in ("python", "torchrun", "deepspeed", "pip")]
    assert lines[5] == "2.13.0+cpu /opt/venv"
    assert lines[6] == "after=unset"


def test_published_files_are_readable_by_all_and_writable_by_none_but_the_owner(published):
    for path in [published, *published.rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        assert mode & stat.S_IROTH and not mode & stat.S_IWOTH and not mode & stat.S_IWGRP, path
        if path.parent.name == "bin" or path.is_dir():
            assert mode & stat.S_IXOTH, path
    lua = (published / "modulefiles" / "pytorch" / "1.0.lua").read_text()
    # PATH gets the version's own bin/ and nothing else; conflicts only by name
    assert [line for line in lua.splitlines() if "PATH" in line and "SING" not in line] == [
        f'prepend_path("PATH", "{published}/pytorch/1.0/bin")'
    ]
    assert 'family("pytorch")' in lua and "conflict(" not in lua


def test_lmod_checks_the_syntax_and_whatis_and_help_name_the_versions(published, apptainer):
    result = lmod("module --checkSyntax load pytorch/1.0", published, apptainer)
    assert result.returncode == 0 and "rror" not in result.stderr, result.stderr
    tree = runner.run([str(LMOD_DIR / "check_module_tree_syntax"), str(published / "modulefiles")], check=False)
    assert "possible errors" not in tree.stdout + tree.stderr, tree.stdout + tree.stderr
    result = lmod("module whatis pytorch/1.0; module help pytorch/1.0", published, apptainer)
    text = result.stderr + result.stdout
    for expected in (
        "torch 2.13.0+cpu",
        "DeepSpeed 0.19.8",
        "collectives gloo",
        "mpi4py 4.1.2 (openmpi ABI)",
        "recipe sha256 ",
        "Smoke tests: passed",
        "Built: ",
        f"SBOM: {published}/pytorch/1.0/sbom.cdx.json",
        f"Contents (SBOM, CycloneDX): {published}/pytorch/1.0/sbom.cdx.json",
    ):
        assert expected in text, (expected, text)


def test_the_helps_check_of_the_files_runs_with_the_module_loaded(published, apptainer):
    result = lmod("module help pytorch/1.0", published, apptainer)
    lines = [line.strip() for line in (result.stderr + result.stdout).splitlines()]
    check = next(line for line in lines if line.startswith("Check the files: "))
    shell = "module load pytorch/1.0\n" + check.removeprefix("Check the files: ") + " && echo checked"
    ran = lmod(shell, published, apptainer, PATH=os.environ["PATH"])
    assert ran.returncode == 0 and ran.stdout.strip() == "checked", ran.stdout + ran.stderr
    (published / "pytorch" / "1.0" / "recipe.json").write_text("{}")
    assert lmod(shell, published, apptainer, PATH=os.environ["PATH"]).returncode != 0


def test_the_images_sbom_is_published_beside_it_and_listed_in_the_checksums(published, smoked):
    root = published / "pytorch" / "1.0"
    assert (root / "sbom.cdx.json").read_bytes() == smoked.with_name("cpu.sbom.json").read_bytes()
    assert "  sbom.cdx.json" in (root / "SHA256SUMS").read_text()


def test_lmod_checksyntax_catches_a_broken_module(tmp_path, apptainer):
    broken = tmp_path / "modulefiles" / "broken"
    broken.mkdir(parents=True)
    (broken / "1.0.lua").write_text('setenv("X", \n')
    result = lmod("module --checkSyntax load broken/1.0", tmp_path, apptainer)
    assert result.returncode != 0


def test_two_versions_side_by_side_and_the_default_switches(published, smoked, apptainer):
    assert publish(smoked, published, "--version", "2.0", env={"HPCML_APPTAINER": apptainer}).returncode == 0
    # release notes against the version published before, listed in the checksums
    assert (published / "pytorch/1.0/CHANGES.txt").read_text().startswith("Changes in pytorch/1.0: the first")
    notes = (published / "pytorch/2.0/CHANGES.txt").read_text()
    assert notes.startswith("Changes in pytorch/2.0 since 1.0 (hpcml diff):") and notes.endswith("no differences\n")
    assert "  CHANGES.txt" in (published / "pytorch/2.0/SHA256SUMS").read_text()
    load = 'module load pytorch\necho "$HPCML_MODULE"\n'
    assert lmod(load, published, apptainer).stdout == "pytorch/1.0\n"  # .version says so
    result = run_builder("default", "--prefix", published, "pytorch/2.0")
    assert result.returncode == 0, result.stderr
    assert lmod(load, published, apptainer).stdout == "pytorch/2.0\n"
    # loading the other version swaps it in: one pytorch at a time, through the family
    result = lmod(
        'module load pytorch/2.0\nmodule load pytorch/1.0\necho "$LOADEDMODULES"\n'
        "python -c 'import os; print(os.environ[\"SING_IMAGE\"])'\n",
        published,
        apptainer,
    )
    assert result.stdout.splitlines() == ["pytorch/1.0", f"{published}/pytorch/1.0/image.sif"], result.stderr
    # publishing with --default moves the default again
    assert (
        publish(smoked, published, "--version", "3.0", "--default", env={"HPCML_APPTAINER": apptainer}).returncode == 0
    )
    assert lmod(load, published, apptainer).stdout == "pytorch/3.0\n"


def test_the_tcl_module_loads_with_environment_modules(published, environment_modules, apptainer):
    result = tcl_module(
        environment_modules,
        published,
        apptainer,
        [
            "load pytorch",
            '!echo "$LOADEDMODULES $HPCML_SITE"',
            "!python -c 'import torch; print(torch.__version__)'",
            "whatis pytorch/1.0",
            "unload pytorch",
            '!echo "after=${SING_IMAGE:-unset}"',
        ],
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["pytorch/1.0 local", "2.13.0+cpu", "after=unset"]
    assert "torch 2.13.0+cpu" in result.stderr and "Smoke tests: passed" in result.stderr


def test_modules_with_awkward_text_load_in_both_module_systems(tmp_path, environment_modules, apptainer):
    # text a quoting slip would break: quotes, $, brackets, braces and Lua's ]] closer
    awkward = 'say "hi" $HOME [x] {y} ]] ]=] back\\slash'
    module = Module(
        name="odd",
        version="1.0-x",
        root=str(tmp_path / "odd root"),
        site="lumi",
        description=awkward,
        help_text=f"help: {awkward}",
        whatis=(awkward,),
        gpu_flag="--rocm",
        slurm_mpi="pmi2",
        container_env=(("NCCL_NET", "AWS Libfabric"),),
        env_prefix="SINGULARITYENV_",
    )
    folder = tmp_path / "modulefiles" / "odd"
    folder.mkdir(parents=True)
    (folder / "1.0-x.lua").write_text(render_lua(module))
    (folder / "1.0-x").write_text(render_tcl(module))
    show = 'echo "$SING_FLAGS|$SLURM_MPI_TYPE|$SINGULARITYENV_NCCL_NET|$SING_IMAGE"'
    expected = f"-B /data --rocm|pmi2|AWS Libfabric|{tmp_path}/odd root/image.sif"
    result = lmod(
        f'module load odd/1.0-x\n{show}\nmodule help odd/1.0-x\nmodule unload odd\necho "[$SING_FLAGS]"',
        tmp_path,
        apptainer,
        SING_FLAGS="-B /data",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [expected, "[-B /data]"]  # the user's flags kept
    assert f"help: {awkward}" in result.stderr
    result = tcl_module(
        environment_modules,
        tmp_path,
        apptainer,
        [
            "!export SING_FLAGS='-B /data'",
            "load odd/1.0-x",
            "!" + show,
            "help odd/1.0-x",
            "unload odd",
            '!echo "[$SING_FLAGS]"',
        ],
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [expected, "[-B /data]"]
    assert f"help: {awkward}" in result.stderr


def test_pip_installs_on_top_of_the_image_into_the_user_base(published, apptainer, tmp_path):
    wheel = tmp_path / "hello_hpcml-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("hello_hpcml/__init__.py", "GREETING = 'hello from the user base'\n")
        archive.writestr(
            "hello_hpcml-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: hello-hpcml\nVersion: 1.0\n"
        )
        archive.writestr(
            "hello_hpcml-1.0.dist-info/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        archive.writestr("hello_hpcml-1.0.dist-info/RECORD", "")
    base = tmp_path / "user base"
    result = lmod(
        f"module load pytorch/1.0\npip install --user --no-index --no-deps {wheel}\n"
        "python -c 'import hello_hpcml as h; print(h.GREETING); print(h.__file__)'\n",
        published,
        apptainer,
        HPCML_USER_BASE=str(base),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    greeting, where = result.stdout.splitlines()[-2:]
    assert greeting == "hello from the user base" and where.startswith(f"{base}/lib/python3")


def test_verify_passes_then_finds_a_modified_a_truncated_and_an_added_file(published):
    ok = run_builder("verify", "--prefix", published, "pytorch/1.0")
    assert ok.returncode == 0 and "all 16 files match" in ok.stdout, ok.stdout + ok.stderr
    root = published / "pytorch" / "1.0"
    image = root / "image.sif"
    with open(image, "r+b") as handle:  # one byte changed in the middle
        handle.seek(image.stat().st_size // 2)
        byte = handle.read(1)
        handle.seek(-1, os.SEEK_CUR)
        handle.write(bytes([byte[0] ^ 0xFF]))
    bad = run_builder("verify", "--prefix", published, "pytorch/1.0")
    assert bad.returncode == 1 and "image.sif: changed" in bad.stdout, bad.stdout + bad.stderr
    os.truncate(image, image.stat().st_size - 4096)
    (root / "bin" / "sneaky").write_text("#!/bin/sh\n")
    bad = run_builder("verify", "--prefix", published, "pytorch/1.0")
    assert bad.returncode == 1 and "image.sif: changed" in bad.stdout and "sneaky: not published" in bad.stdout
    assert bad.stderr.startswith("error: pytorch/1.0: 2 problem(s)")
    # the checksum file is sha256sum's own format
    check = subprocess.run(["sha256sum", "--quiet", "-c", "SHA256SUMS"], cwd=root, capture_output=True, text=True)
    assert check.returncode == 1 and "image.sif: FAILED" in check.stdout


def test_no_publish_without_a_passing_smoke_report_of_this_image(smoked, prefix, tmp_path, apptainer):
    env = {"HPCML_APPTAINER": apptainer}
    empty = tmp_path / "no-report"
    empty.mkdir()
    result = publish(smoked, prefix, "--smoke-report", empty, env=env)
    assert result.returncode == 1 and "no smoke report" in result.stderr and "--skip-smoke" in result.stderr
    failed = tmp_path / "failed"
    shutil.copytree(smoked.parent / "cpu.smoke", failed)
    report = json.loads((failed / "smoke.json").read_text())
    report["verdict"] = "fail"
    report["checks"]["ddp"]["verdict"] = "fail"
    (failed / "smoke.json").write_text(json.dumps(report))
    result = publish(smoked, prefix, "--smoke-report", failed, env=env)
    assert result.returncode == 1 and "did not pass" in result.stderr and "failed: ddp" in result.stderr
    other = tmp_path / "other"
    shutil.copytree(smoked.parent / "cpu.smoke", other)
    (other / "image.sha256").write_text("0" * 64 + "  cpu.sif\n")
    result = publish(smoked, prefix, "--smoke-report", other, env=env)
    assert result.returncode == 1 and "the report is of another image" in result.stderr
    assert result.stderr.count("\n") == 1
    (other / "image.sha256").unlink()  # a report of `python -m smoke` run by hand
    result = publish(smoked, prefix, "--smoke-report", other, env=env)
    assert result.returncode == 1 and result.stderr.count("\n") == 1
    assert f"{other}/image.sha256: missing, so the report does not say which image it tested" in result.stderr
    assert f"sha256sum {smoked} > {other}/image.sha256" in result.stderr
    short = tmp_path / "short"
    shutil.copytree(smoked.parent / "cpu.smoke", short)
    report = json.loads((short / "smoke.json").read_text())
    report["checks"]["allreduce busbw"] = {"verdict": "not measured", "why": "the sweep did not include 256 bytes"}
    (short / "smoke.json").write_text(json.dumps(report))
    result = publish(smoked, prefix, "--smoke-report", short, env=env)
    assert result.returncode == 1 and result.stderr.count("\n") == 1
    assert "not measured: allreduce busbw (the sweep did not include 256 bytes)" in result.stderr
    # nothing was published by any of these
    assert not list((prefix / "pytorch").glob("[!.]*")) and not list((prefix / "modulefiles" / "pytorch").iterdir())
    result = publish(smoked, prefix, "--smoke-report", empty, "--skip-smoke", "--version", "untested", env=env)
    assert result.returncode == 0, result.stderr
    lua = (prefix / "modulefiles" / "pytorch" / "untested.lua").read_text()
    assert "Smoke tests: NOT RUN: published with --skip-smoke" in lua
    assert "smoke tests NOT RUN" in run_builder("verify", "--prefix", prefix, "pytorch/untested").stdout


def test_an_existing_version_is_replaced_only_with_force(published, smoked, apptainer):
    env = {"HPCML_APPTAINER": apptainer}
    before = tree_state(published)
    result = publish(smoked, published, "--version", "1.0", env=env)
    assert result.returncode == 2
    assert result.stderr == (f"error: {published}/pytorch/1.0: pytorch/1.0 is already published; --force replaces it\n")
    assert tree_state(published) == before
    manifest = published / "pytorch" / "1.0" / "publish.json"
    first = json.loads(manifest.read_text())["published"]
    time.sleep(1.1)
    result = publish(smoked, published, "--version", "1.0", "--force", env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(manifest.read_text())["published"] != first
    assert not (published / "modulefiles" / "pytorch" / "1.0").exists()  # no --tcl this time
    assert run_builder("verify", "--prefix", published, "pytorch/1.0").returncode == 0


@pytest.mark.parametrize("version", ["1.0", "9.9"], ids=["replacing", "new"])
def test_a_killed_publish_leaves_the_published_tree_as_it_was(published, smoked, apptainer, version):
    before = tree_state(published)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parents[3]), HPCML_APPTAINER=apptainer)
    process = subprocess.Popen(
        [
            sys.executable,  # the checkout's venv: a bare python3 may lack the builder's packages
            "-m",
            "builder",
            "publish",
            "cpu",
            "--images",
            str(smoked.parent),
            "--prefix",
            str(published),
            "--version",
            version,
            "--force",
            "--default",
        ],
        cwd=Path(__file__).parents[3],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    staged = None
    while time.monotonic() < deadline and process.poll() is None:  # kill it mid-copy
        staged = next(
            (
                p / "image.sif"
                for p in (published / "pytorch").glob(f".{version}.partial-*")
                if (p / "image.sif").exists()
            ),
            None,
        )
        if staged is not None:
            break
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert staged is not None, "the publish ended before it could be killed"
    assert tree_state(published) == before
    assert run_builder("verify", "--prefix", published, "pytorch/1.0").returncode == 0
    # the next publish clears what the killed one left
    assert (
        publish(smoked, published, "--version", version, "--force", env={"HPCML_APPTAINER": apptainer}).returncode == 0
    )
    assert not list((published / "pytorch").glob(f".{version}.*"))


@pytest.mark.parametrize(
    "args, message",
    [
        (["--name", "../evil"], "--name '../evil': expected letters, digits and . _ -"),
        (["--version", "2.0.lua"], "--version '2.0.lua': expected letters"),
        (["--site", "lumi"], "site 'lumi' is not one cpu is built for (expected one of: local)"),
        (["--prefix", ""], "--prefix is empty"),
        (["--prefix", "{prefix}/typo"], "/typo: no such folder; expected the existing folder for published modules"),
    ],
)
def test_publish_mistakes_get_one_line_and_exit_2(smoked, prefix, apptainer, args, message):
    if args[0] == "--prefix":
        args = [arg.format(prefix=prefix) for arg in args]
        result = run_builder("publish", "cpu", "--images", smoked.parent, *args, env={"HPCML_APPTAINER": apptainer})
    else:
        result = publish(smoked, prefix, *args, env={"HPCML_APPTAINER": apptainer})
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert not list(prefix.iterdir())


def test_a_world_writable_prefix_is_refused(smoked, tmp_path, apptainer):
    prefix = tmp_path / "open"
    prefix.mkdir()
    prefix.chmod(0o777)
    result = publish(smoked, prefix, env={"HPCML_APPTAINER": apptainer})
    assert result.returncode == 2 and "world-writable" in result.stderr
    assert list(prefix.iterdir()) == []


@pytest.mark.parametrize(
    "spec, message",
    [
        ("pytorch", "expected NAME/VERSION"),
        ("pytorch/0.0", "pytorch/0.0 is not published here"),
    ],
)
def test_verify_and_default_mistakes_exit_2(tmp_path, spec, message):
    for command in ("verify", "default"):
        result = run_here(command, "--prefix", tmp_path, spec)
        assert result.returncode == 2 and message in result.stderr and result.stderr.count("\n") == 1


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "expected a published version (NAME/VERSION --prefix DIR) or a built image (--lock IMAGE)"),
        (["pytorch/1.0"], "expected a published version (NAME/VERSION --prefix DIR) or a built image"),
        (["--lock", "images/cpu.sif", "--prefix", "/appl"], "--lock checks a built image, --prefix a published"),
        (["--lock-target", "cpu"], "--lock-target goes with --lock IMAGE"),
    ],
)
def test_verify_without_a_published_version_or_a_lock_exits_2(args, message):
    result = run_here("verify", *args)
    assert result.returncode == 2 and result.stderr.startswith("error: command line: "), result.stderr
    assert message in result.stderr and result.stderr.count("\n") == 1


@pytest.mark.parametrize("command", ["python", "pip"])
def test_entry_point_scripts_are_shellcheck_clean(command):
    result = runner.run(
        ["shellcheck", "--shell=bash", "--severity=style", "-"],
        input=render_entry(command, "pytorch/2.7", "lumi"),
        check=False,
    )
    assert result.returncode == 0, result.stdout
