"""The smoke suite's preflight with simulated nodes: drivers, GPUs and torch builds.

No GPU is needed: a Host is what probe() would read on a node, written by hand. The probe
itself runs on this machine (no GPU, no driver) and through the command line.
"""

import dataclasses
import json
import os
import sys

import pytest
from conftest import ROOT, run_runtime_module

sys.path.insert(0, str(ROOT / "runtime"))
from helpers.elf_files import elf, entry, fat_binary  # noqa: E402
from hpcml_facts import ImageFacts, SiteFacts  # noqa: E402
from smoke import preflight  # noqa: E402
from smoke.archs import runs_on  # noqa: E402
from smoke.preflight import Host  # noqa: E402
from smoke.verdict import Verdict  # noqa: E402


def image(data: dict) -> ImageFacts:
    """An image's image.json, of an image named test."""
    return ImageFacts.from_json({"target": "test", **data}, "image.json")


def site_facts(data: dict) -> SiteFacts:
    return SiteFacts.from_json({"site": "test", **data}, "site facts")


MIN_DRIVER = {"12": "525.60.13", "13": "580.65.06"}
# recipes/versions.yaml's rows for LUMI's driver and a newer one, as a ROCm image carries them
AMD_MATRIX = {
    "amdgpu_runs": {"6.3": ["6.1", "6.2", "6.3", "6.4", "7.0"], "30.10": ["6.2", "6.3", "6.4", "7.0", "7.1", "7.2"]},
    "amdgpu_modules": {"6.10.5": "6.3"},
}
V100_A100 = image({"gpu": {"archs": ["sm_70", "sm_80"], "min_driver": MIN_DRIVER}})
H100 = image({"gpu": {"archs": ["sm_90"], "min_driver": MIN_DRIVER}})
CPU_IMAGE = image({"gpu": None})
CU126_ARCHS = ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90")
CU130_ARCHS = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120")


def a100(driver="550.54.15", cuda="12.6", archs=CU126_ARCHS, count=4):
    return Host(
        driver=driver,
        gpus=(("NVIDIA A100-SXM4-40GB", "sm_80"),) * count,
        torch="2.13.0",
        torch_cuda=cuda,
        torch_archs=archs,
    )


def verdicts(results):
    return {name: result.verdict for name, result in results.items()}


def test_a_matching_node_passes_every_check():
    results = preflight.check(a100(), V100_A100)
    assert verdicts(results) == {
        "preflight cpu arch": "pass",
        "preflight torch": "pass",
        "preflight image torch archs": "pass",
        "preflight image op archs": "none",
        "preflight driver": "pass",
        "preflight gpu arch": "pass",
        "preflight torch archs": "pass",
    }
    assert results["preflight driver"].why == "driver 550.54.15 >= 525.60.13 (CUDA 12.6)"
    assert "sm_80 (4 GPU(s))" in results["preflight gpu arch"].why


def test_a_driver_too_old_for_the_images_cuda_says_what_to_do():
    results = preflight.check(a100(driver="570.124.06", cuda="13.0", archs=CU130_ARCHS), H100)
    why = results["preflight driver"].why
    assert results["preflight driver"].verdict == "fail"
    assert why.startswith("driver 570.124.06 is older than 580.65.06, which CUDA 13.0")
    assert "older CUDA" in why and "newer driver" in why
    assert "\n" not in why


def test_a_v100_under_a_torch_without_volta_kernels_fails_before_any_collective():
    v100 = Host(
        driver="560.35.03",
        gpus=(("Tesla V100-SXM2-32GB", "sm_70"),),
        torch="2.13.0",
        torch_cuda="13.0",
        torch_archs=CU130_ARCHS,
    )
    results = preflight.check(v100, V100_A100)
    assert results["preflight gpu arch"].verdict == "pass"  # the image was built for it
    torch_archs = results["preflight torch archs"]
    assert torch_archs.verdict == "fail"
    assert torch_archs.why.startswith("Tesla V100-SXM2-32GB (sm_70): torch has no code for it")
    assert "carries sm_70" in torch_archs.why


def test_a_gpu_the_image_was_not_built_for_is_named_with_the_image_to_use():
    results = preflight.check(a100(), H100)
    assert results["preflight gpu arch"].verdict == "fail"
    assert (
        "(sm_80): the image (and its DeepSpeed ops) has no code for it (holds sm_90)"
        in results["preflight gpu arch"].why
    )
    assert "use the image built for sm_80" in results["preflight gpu arch"].why


@pytest.mark.parametrize(
    "gpu, archs, how",
    [
        ("sm_86", ("sm_80",), "native"),  # same major, newer minor
        ("sm_80", ("sm_86",), ""),  # older minor: no
        ("sm_90", ("sm_80",), ""),  # newer major without PTX: no
        ("sm_90", ("sm_80", "compute_80"), "ptx"),
        ("sm_90", ("sm_90a",), "native"),
        ("gfx90a", ("gfx90a",), "native"),
        ("gfx942", ("gfx90a",), ""),
    ],
)
def test_which_code_runs_on_which_gpu(gpu, archs, how):
    assert runs_on(gpu, archs) == how


def test_ptx_only_passes_with_a_note_that_the_first_use_compiles():
    h100 = Host(
        driver="580.82.07",
        gpus=(("NVIDIA H100 80GB HBM3", "sm_90"),),
        torch="2.13.0",
        torch_cuda="13.0",
        torch_archs=("sm_80", "compute_80"),
    )
    result = preflight.check(h100, H100)["preflight torch archs"]
    assert result.verdict == "pass" and "sm_90 through PTX, compiled at first use" in result.why


def test_without_a_gpu_the_gpu_checks_wait_for_a_gpu_node_and_the_torch_check_runs():
    results = preflight.check(Host(torch="2.13.0", torch_cuda="12.6", torch_archs=CU126_ARCHS), V100_A100)
    assert verdicts(results) == {
        "preflight cpu arch": "pass",
        "preflight torch": "pass",
        "preflight image torch archs": "pass",
        "preflight image op archs": "none",
        "preflight gpu": "none",
    }
    assert "GPU node" in results["preflight gpu"].why


# What a build host without a GPU can prove in the image's %test: torch and every CUDA op
# hold machine code for each arch the image promises.
OPS_80 = (("fused_adam_op", ("sm_80",)), ("transformer_op", ("sm_80",)))
DS_CUDA = {"deepspeed": {"accelerator": "cuda", "promised_ops": ["fused_adam", "transformer"]}}
A100 = image({"gpu": {"archs": ["sm_80"], "min_driver": MIN_DRIVER}, **DS_CUDA})


def test_an_image_built_right_passes_its_own_arch_checks_without_a_gpu():
    host = Host(torch="2.13.0", torch_cuda="13.0", torch_archs=CU130_ARCHS, op_archs=OPS_80)
    results = preflight.check(host, A100)
    assert verdicts(results)["preflight image torch archs"] == "pass"
    assert results["preflight image op archs"] == Verdict.passed("DeepSpeed op holds code for sm_80 (2 files)")


def test_a_torch_without_the_images_arch_fails_the_build_not_the_first_job():
    v100_image = image({"gpu": {"archs": ["sm_70"], "min_driver": MIN_DRIVER}, **DS_CUDA})
    host = Host(torch="2.13.0", torch_cuda="13.0", torch_archs=CU130_ARCHS, op_archs=(("fused_adam_op", ("sm_70",)),))
    result = preflight.check(host, v100_image)["preflight image torch archs"]
    assert result.verdict == "fail"
    assert result.why.startswith("torch has no code for sm_70 (holds sm_75, sm_80")
    assert "rebuild it with a torch build for those archs" in result.why


def test_an_op_compiled_for_the_wrong_arch_is_named():
    ops = (("fused_adam_op", ("sm_80",)), ("transformer_op", ("sm_75", "compute_75")))
    host = Host(torch="2.13.0", torch_cuda="13.0", torch_archs=CU130_ARCHS, op_archs=ops)
    result = preflight.check(host, A100)["preflight image op archs"]
    assert result == Verdict.failed(
        "transformer_op has no code for sm_80 (holds sm_75, compute_75): the image "
        "does not keep its promise; rebuild it with a DeepSpeed op build for those archs"
    )


def test_cuda_ops_promised_but_none_compiled_for_cuda_fails():
    host = Host(torch="2.13.0", torch_cuda="13.0", torch_archs=CU130_ARCHS)
    result = preflight.check(host, A100)["preflight image op archs"]
    assert result.verdict == "fail" and "DS_ACCELERATOR=cuda" in result.why


def test_on_a_gpu_node_each_op_is_checked_against_the_gpus_arch():
    h100 = Host(
        driver="580.95.05",
        gpus=(("NVIDIA H100 80GB HBM3", "sm_90"),),
        torch="2.13.0",
        torch_cuda="13.0",
        torch_archs=CU130_ARCHS,
        op_archs=OPS_80,
    )
    result = preflight.check(h100, A100)["preflight op archs"]
    assert result.verdict == "fail"
    assert result.why.startswith(
        "NVIDIA H100 80GB HBM3 (sm_90): DeepSpeed's fused_adam_op has no code for it (holds sm_80)"
    )
    a100_node = Host(
        driver="580.95.05",
        gpus=(("NVIDIA A100-SXM4-80GB", "sm_80"),) * 8,
        torch="2.13.0",
        torch_cuda="13.0",
        torch_archs=CU130_ARCHS,
        op_archs=OPS_80,
    )
    assert preflight.check(a100_node, A100)["preflight op archs"] == Verdict.passed(
        "all 2 CUDA ops of DeepSpeed run on sm_80"
    )


def test_the_ops_are_found_by_path_without_importing_deepspeed(tmp_path, monkeypatch):
    package = tmp_path / "deepspeed"
    (package / "ops" / "adam").mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (package / "ops" / "adam" / "cpu_adam_op.cpython-313-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    (package / "ops" / "adam" / "notes.so").write_text("x" * 100)
    (package / "ops" / "transformer").mkdir()
    (package / "ops" / "transformer" / "transformer_op.cpython-313-x86_64-linux-gnu.so").write_bytes(
        elf([(b".nv_fatbin", fat_binary(entry(2, 80), entry(1, 80)))])
    )
    (package / "inference" / "v2").mkdir(parents=True)  # where ragged_ops lives
    (package / "inference" / "v2" / "ragged_ops.cpython-313-x86_64-linux-gnu.so").write_bytes(
        elf([(b".nv_fatbin", fat_binary(entry(2, 80)))])
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    # unreadable or CPU-only files are left out; the module is never imported
    assert preflight.deepspeed_op_archs() == (("ragged_ops", ("sm_80",)), ("transformer_op", ("sm_80", "compute_80")))


def test_a_driver_without_nvidia_smi_means_the_container_lacks_nv():
    host = Host(
        driver="550.54.15",
        gpu_error="nvidia-smi is not in the container: start it with --nv",
        torch="2.13.0",
        torch_cuda="12.6",
        torch_archs=CU126_ARCHS,
    )
    results = preflight.check(host, V100_A100)
    assert results["preflight gpu"] == Verdict.failed(host.gpu_error)


def test_a_cpu_torch_in_a_gpu_image_and_a_gpu_torch_in_the_cpu_image_fail():
    assert preflight.check(Host(torch="2.13.0"), V100_A100)["preflight torch"].verdict == "fail"
    assert "does not import" in preflight.check(Host(), CPU_IMAGE)["preflight torch"].why
    assert preflight.check(Host(), ImageFacts(target=None)) == {
        "preflight": Verdict.none("not inside an image: nothing promised to check this node against")
    }
    cpu = preflight.check(Host(torch="2.13.0", torch_cuda="13.0"), CPU_IMAGE)
    assert verdicts(cpu) == {"preflight cpu arch": "pass", "preflight torch": "fail", "preflight gpu": "pass"}
    assert "a cuda build where the image promises cpu" in cpu["preflight torch"].why


def test_rocm_archs_come_from_the_kfd_topology(tmp_path, monkeypatch):
    for node, version in (("0", "0"), ("1", "90010"), ("2", "90010")):
        (tmp_path / node).mkdir()
        (tmp_path / node / "properties").write_text(f"cpu_cores_count 0\ngfx_target_version {version}\n")
    monkeypatch.setattr(preflight, "KFD_NODES", tmp_path)
    monkeypatch.setattr(preflight, "NVIDIA_DRIVER", tmp_path / "absent")
    (tmp_path / "amdgpu-version").write_text("6.10.5\n")  # a stand-in for LUMI's amdgpu 6.3 module
    monkeypatch.setattr(preflight, "AMDGPU_VERSION", tmp_path / "amdgpu-version")
    host = preflight.probe()
    assert [arch for _, arch in host.gpus] == ["gfx90a", "gfx90a"] and host.amdgpu == "6.10.5"
    rocm_image = image({"gpu": {"archs": ["gfx90a"], **AMD_MATRIX}})
    lumi = preflight.check(
        dataclasses.replace(host, torch="2.10.0", torch_hip="7.0.51831", torch_archs=("gfx90a",)), rocm_image
    )
    assert verdicts(lumi) == {
        "preflight cpu arch": "pass",
        "preflight torch": "pass",
        "preflight driver": "pass",
        "preflight gpu arch": "pass",
        "preflight torch archs": "pass",
    }
    assert lumi["preflight driver"].why == "amdgpu 6.10.5 (release 6.3) runs ROCm 7.0 (AMD's support matrix)"
    newer = preflight.check(dataclasses.replace(host, torch="2.11.0", torch_hip="7.2.26015"), rocm_image)
    assert newer["preflight driver"].verdict == "fail"
    assert "runs ROCm 6.1 to 7.0, not this image's ROCm 7.2" in newer["preflight driver"].why


def test_the_driver_version_is_read_from_proc(tmp_path, monkeypatch):
    proc = tmp_path / "version"
    proc.write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 "
        "22:23:56 UTC 2024\nGCC version:  gcc version 12.2.0\n"
    )
    monkeypatch.setattr(preflight, "NVIDIA_DRIVER", proc)
    monkeypatch.setattr(preflight.shutil, "which", lambda name: None)
    host = preflight.probe()
    assert host.driver == "550.54.15" and "--nv" in host.gpu_error


def run_smoke(*args, env=None):
    return run_runtime_module("smoke", *args, env=env)


def test_the_command_line_on_a_node_without_a_gpu(tmp_path):
    image = tmp_path / "image.json"
    image.write_text(json.dumps(V100_A100.to_json()))
    result = run_smoke("preflight", "--image-facts", image, "--out", tmp_path / "never")
    assert not (tmp_path / "never").exists()  # it writes nothing: it runs in a read-only %test
    # this machine's python has no torch: the torch check fails, the GPU checks wait
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith("preflight gpu") and "NONE" in line for line in lines)
    assert any(line.startswith("preflight torch") and "FAIL" in line for line in lines)


def test_all_stops_before_any_collective_when_the_preflight_fails(tmp_path):
    image = tmp_path / "image.json"
    image.write_text(json.dumps(V100_A100.to_json()))
    result = run_smoke("all", "--image-facts", image, "--out", tmp_path / "report", "--timeout", "30")
    assert result.returncode == 1
    assert result.stdout.splitlines()[-1] == "smoke: the preflight failed, so no collective was started"
    assert "smoke: 1 rank(s)" not in result.stdout + result.stderr  # no session was joined


def test_one_process_per_node_reports_the_preflight(tmp_path):
    image = tmp_path / "image.json"
    image.write_text(json.dumps(V100_A100.to_json()))
    ranks = {
        "RANK": "1",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "2",
        "LOCAL_WORLD_SIZE": "2",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "29500",
    }
    second = run_smoke("preflight", "--image-facts", image, env={**os.environ, **ranks})
    assert second.returncode == 1 and second.stdout == ""
    first = run_smoke("preflight", "--image-facts", image, env={**os.environ, **ranks, "RANK": "0", "LOCAL_RANK": "0"})
    assert "preflight torch" in first.stdout


# --- the network plugin, as the job will load it ----------------------------------------------

LUMI_COMM = image(
    {
        "comm": {
            "library": "rccl",
            "plugin": "aws-ofi-nccl",
            "provider": "cxi",
            "plugin_path": "/opt/aws-ofi-nccl/lib/librccl-net.so",
            "rccl": "/opt/rocm/lib/librccl.so.1",
            "libfabric_dir": "/opt/libfabric/lib",
        }
    }
)
HOST_SITE = {
    "network": {
        "transport": "ofi",
        "provider": "cxi",
        "libfabric": "host",
        "host_library_path": ["/opt/cray/libfabric/1.22.0/lib64", "/usr/lib64"],
    }
}


def recorded_runs(results=None):
    calls = []

    def run(check, argv):
        calls.append((check, argv))
        return (results or {}).get(check, (True, f"netcheck {check}: ok: fine"))

    return calls, run


@pytest.mark.parametrize(
    "site, nodes, libfabric",
    [
        ({}, 1, "/opt/libfabric/lib"),
        ({"network": {"libfabric": "image"}}, 2, "/opt/libfabric/lib"),
        (HOST_SITE, 1, "/opt/libfabric/lib"),  # one node: nothing of the host's
        (HOST_SITE, 2, "/opt/cray/libfabric/1.22.0/lib64"),
    ],
)
def test_the_plugin_is_checked_against_the_libfabric_the_job_uses(site, nodes, libfabric):
    calls, run = recorded_runs()
    results = preflight.network(LUMI_COMM, site_facts(site), nodes, run=run)
    assert calls == [
        (
            "plugin",
            [
                "--plugin",
                "/opt/aws-ofi-nccl/lib/librccl-net.so",
                "--rccl",
                "/opt/rocm/lib/librccl.so.1",
                "--libfabric-dir",
                libfabric,
            ],
        ),
        ("provider", ["--libfabric", f"{libfabric}/libfabric.so.1", "--provider", "cxi"]),
    ]
    assert {r.verdict for r in results.values()} == {"pass"}


def test_a_failing_network_check_fails_the_preflight_with_its_line():
    _, run = recorded_runs({"provider": (False, "netcheck provider: FAIL: fi_info -p cxi exited 1")})
    results = preflight.network(LUMI_COMM, site_facts({}), 2, run=run)
    assert results["preflight net provider"] == Verdict.failed("fi_info -p cxi exited 1")
    assert results["preflight net plugin"].verdict == "pass"


def test_images_without_a_plugin_have_no_network_preflight():
    calls, run = recorded_runs()
    assert preflight.network(image({"comm": {"library": "nccl", "plugin": None}}), site_facts({}), 2, run=run) == {}
    assert preflight.network(ImageFacts(target=None), site_facts({}), 2, run=run) == {} and calls == []


def test_an_image_of_another_cpu_arch_than_the_node_fails_unless_emulation_is_asked_for():
    """Under QEMU uname says the image's architecture; the kernel's sysctl says the node's."""
    emulated = Host(torch="2.13.0", machine="aarch64", kernel_arch="x86_64")
    results = preflight.check(emulated, CPU_IMAGE)
    assert results["preflight cpu arch"].verdict == "fail"
    assert results["preflight cpu arch"].why == (
        "this aarch64 image runs emulated on an x86_64 node, many times slower: "
        "run it on an aarch64 node (HPCML_ALLOW_EMULATION=1 to go on)"
    )
    allowed = preflight.check(dataclasses.replace(emulated, allow_emulation=True), CPU_IMAGE)
    assert (
        allowed["preflight cpu arch"].verdict == "pass"
        and "HPCML_ALLOW_EMULATION=1" in allowed["preflight cpu arch"].why
    )
    native = preflight.check(Host(torch="2.13.0", machine="aarch64", kernel_arch="aarch64"), CPU_IMAGE)
    assert native["preflight cpu arch"].verdict == "pass"


def test_the_node_arch_is_read_from_the_kernel_and_the_opt_in_from_the_environment(monkeypatch, tmp_path):
    (tmp_path / "arch").write_text("x86_64\n")
    monkeypatch.setattr(preflight, "KERNEL_ARCH", tmp_path / "arch")
    monkeypatch.setenv("HPCML_ALLOW_EMULATION", "1")
    host = preflight.probe()
    assert (host.kernel_arch, host.allow_emulation) == ("x86_64", True)
    monkeypatch.setattr(preflight, "KERNEL_ARCH", tmp_path / "absent")
    monkeypatch.delenv("HPCML_ALLOW_EMULATION")
    host = preflight.probe()
    assert (host.kernel_arch, host.allow_emulation) == ("", False)
    assert preflight.check(host, CPU_IMAGE)["preflight cpu arch"].verdict == "pass"
