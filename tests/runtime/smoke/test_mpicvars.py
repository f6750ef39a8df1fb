"""smoke.mpicvars against a real MPICH (PyPI's build of the release lumi-rocm compiles): the
control variables the image's environment sets are read back by MPICH itself, and a name MPICH
does not know, or a value it did not take, fails in one line."""

import re
import sys

import pytest
from conftest import ROOT
from helpers import deffile, mpich_wheel, runtime_module

sys.path.insert(0, str(ROOT / "runtime"))
from smoke import commands, mpicheck  # noqa: E402

GPU_SETTINGS = ("MPIR_CVAR_ENABLE_GPU", "MPIR_CVAR_CH4_OFI_ENABLE_HMEM", "MPIR_CVAR_CH4_OFI_ENABLE_MR_HMEM")


@pytest.fixture(scope="module")
def libmpi():
    return mpich_wheel.libmpi()


def mpicvars(*args, env=None):
    return runtime_module.run("smoke.mpicvars", *args, env=env, dropped=("MPIR_CVAR_",))


def test_mpich_reads_back_what_the_environment_set(libmpi):
    env = {"MPIR_CVAR_ENABLE_GPU": "0", "MPIR_CVAR_CH4_OFI_ENABLE_HMEM": "1"}
    result = mpicvars("--library", libmpi, "MPIR_CVAR_ENABLE_GPU=0", "MPIR_CVAR_CH4_OFI_ENABLE_HMEM=1", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["MPIR_CVAR_ENABLE_GPU=0", "MPIR_CVAR_CH4_OFI_ENABLE_HMEM=1"]


def test_without_the_settings_mpich_keeps_its_defaults_and_the_check_fails(libmpi):
    # MPICH 5.0.1's defaults: GPU support on, but GPU buffers not handed to libfabric
    result = mpicvars("--library", libmpi, *(f"{name}=1" for name in GPU_SETTINGS))
    assert result.returncode == 1
    assert "MPIR_CVAR_CH4_OFI_ENABLE_HMEM=0" in result.stdout.splitlines()
    (line,) = result.stderr.splitlines()
    assert "MPIR_CVAR_CH4_OFI_ENABLE_HMEM is 0, expected 1" in line
    assert "MPIR_CVAR_ENABLE_GPU" not in line


def test_a_name_mpich_does_not_know_is_named(libmpi):
    result = mpicvars("--library", libmpi, "MPIR_CVAR_ENABLE_GPUS=1", env={"MPIR_CVAR_ENABLE_GPUS": "1"})
    assert result.returncode == 1
    assert result.stdout.strip() == "MPIR_CVAR_ENABLE_GPUS=absent"
    assert result.stderr.strip() == "mpicvars: MPIR_CVAR_ENABLE_GPUS is not a control variable of this MPI"


def test_a_value_that_is_no_integer_is_a_usage_error():
    result = mpicvars("--library", "/nonexistent", "MPIR_CVAR_ENABLE_GPU=yes")
    assert result.returncode == 2
    assert "expected NAME=INTEGER" in result.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("target", ["lumi-rocm", "lumi-rocm64"])
def test_the_rendered_image_sets_what_its_test_reads_back(libmpi, target):
    """The image's %environment and its %test's check, run as written against MPICH 5.0.1."""
    stages = deffile.split((ROOT / "containers" / f"{target}.def").read_text())
    (final,) = [stage for stage in stages if stage.header.get("Stage") == "final"]
    env = dict(re.findall(r"^export (MPIR_CVAR_[A-Z0-9_]+)=(\S+)$", final.section("environment").body, re.M))
    assert sorted(env) == sorted(GPU_SETTINGS) and set(env.values()) == {"1"}
    (check,) = [line for line in final.section("test").body.splitlines() if "smoke.mpicvars" in line]
    argv = check.split()[3:]  # python -m smoke.mpicvars NAME=VALUE ...
    assert mpicvars("--library", libmpi, *argv, env=env).returncode == 0
    assert mpicvars("--library", libmpi, *argv).returncode == 1  # the settings, not the defaults, pass it


@pytest.mark.parametrize("target", ["cpu", "a100-cuda"])
def test_images_without_a_gpu_aware_mpich_set_nothing(target):
    text = (ROOT / "containers" / f"{target}.def").read_text()
    assert "MPIR_CVAR_" not in text and "smoke.mpicvars" not in text


# --- the smoke suite's mpi check: the settings on the job's nodes -------------------------------


class FakeLaunch:
    source = "openmpi"


class FakeSession:
    launch, world = FakeLaunch(), 1


def judged(monkeypatch, stdout, returncode=0):
    monkeypatch.setattr(commands, "run", lambda argv, timeout: commands.Finished(returncode, stdout, "", timeout))
    return mpicheck.check(FakeSession(), "pmix", 60)


def test_the_mpi_check_reports_the_settings_mpi_holds(monkeypatch):
    verdict = judged(monkeypatch, "1 1\nsettings MPIR_CVAR_ENABLE_GPU=1\n")
    assert (verdict.verdict, verdict.why) == (
        "pass",
        "MPI all-reduce over 1 ranks gave 1, expected 1; MPI holds MPIR_CVAR_ENABLE_GPU=1",
    )


def test_the_mpi_check_fails_on_a_setting_mpi_did_not_take(monkeypatch):
    wrong = "MPIR_CVAR_ENABLE_GPUS is not a control variable of this MPI"
    out = f"1 1\nsettings MPIR_CVAR_ENABLE_GPUS=absent\nwrong settings: {wrong}\n"
    verdict = judged(monkeypatch, out)
    assert verdict.verdict == "fail"
    assert verdict.why.endswith(
        "but MPI did not take the environment's settings: MPIR_CVAR_ENABLE_GPUS is not a control variable of this MPI"
    )


def test_without_settings_the_mpi_check_says_what_it_said_before(monkeypatch):
    verdict = judged(monkeypatch, "1 1\n")
    assert (verdict.verdict, verdict.why) == ("pass", "MPI all-reduce over 1 ranks gave 1, expected 1")


@pytest.fixture(scope="module")
def mpich_python():
    import yaml

    pins = yaml.safe_load((ROOT / "recipes" / "versions.yaml").read_text())["python_packages"]
    return mpich_wheel.python_with_mpi4py(pins["mpi4py"])


def test_mpi4py_on_mpich_prints_the_settings_each_rank_holds(mpich_python):
    """The check's child process, run as the smoke suite runs it, with the images' mpi4py on MPICH 5.0.1."""
    env = {"MPIR_CVAR_ENABLE_GPU": "0", "MPIR_CVAR_CH4_OFI_ENABLE_HMEM": "1", "MPIR_CVAR_NOT_ONE": "1"}
    result = runtime_module.run("smoke.mpicheck", 1, env=env, dropped=("MPIR_CVAR_",), python=mpich_python, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "1 1",
        "settings MPIR_CVAR_CH4_OFI_ENABLE_HMEM=1 MPIR_CVAR_ENABLE_GPU=0 MPIR_CVAR_NOT_ONE=absent",
        "wrong settings: MPIR_CVAR_NOT_ONE is not a control variable of this MPI",
    ]
