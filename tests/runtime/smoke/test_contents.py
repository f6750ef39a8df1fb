"""smoke.contents, the one probe of an image's contents: DeepSpeed's compiled ops in both
places its setup puts them, found by path in a fake DeepSpeed tree, and the JSON that
`python -m smoke.contents` prints (what the builder's SBOM reads), run on this Debian host."""

import json
import subprocess
import sys

import pytest
from conftest import ROOT, run_runtime_module

sys.path.insert(0, str(ROOT / "runtime"))
from smoke import contents  # noqa: E402

SUFFIX = ".cpython-311-x86_64-linux-gnu.so"


def fake_deepspeed(root):
    """A DeepSpeed package that must not be imported, with ops where DeepSpeed's setup.py puts
    them (each builder's absolute_name) and .so files elsewhere that are not its ops."""
    package = root / "deepspeed"
    libraries = [
        "ops/adam/cpu_adam_op",
        "ops/transformer/inference/transformer_inference_op",
        "inference/v2/kernels/ragged_ops/ragged_device_ops",  # RaggedOpsBuilder
        "inference/v2/kernelsinference_core_ops",  # InferenceCoreBuilder's name lacks a dot
        "inference/v2/ragged_ops",  # RaggedUtilsBuilder
    ]
    for library in libraries:
        path = package / (library + SUFFIX)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\x7fELF")
    (package / "__init__.py").write_text("raise RuntimeError('deepspeed was imported')\n")
    (package / "ops" / "csrc").mkdir()
    (package / "ops" / "csrc" / "adam.cpp").write_text("// source, not an op\n")
    (package / "inference" / "v1").mkdir()
    (package / "inference" / "v1" / "old_op.so").write_bytes(b"\x7fELF")  # neither ops/ nor inference/v2/
    (package / "ops" / "broken.so").mkdir()  # a folder named like a library
    return package


def test_the_ops_are_found_in_ops_and_in_inference_v2_without_importing_deepspeed(tmp_path, monkeypatch):
    package = fake_deepspeed(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert contents.deepspeed_folders() == (package,)
    found = contents.op_libraries()
    assert [path.relative_to(package).as_posix() for path in found] == [
        f"inference/v2/kernels/ragged_ops/ragged_device_ops{SUFFIX}",
        f"inference/v2/kernelsinference_core_ops{SUFFIX}",
        f"inference/v2/ragged_ops{SUFFIX}",
        f"ops/adam/cpu_adam_op{SUFFIX}",
        f"ops/transformer/inference/transformer_inference_op{SUFFIX}",
    ]
    assert [contents.op_name(path) for path in found] == [
        "ragged_device_ops",
        "kernelsinference_core_ops",
        "ragged_ops",
        "cpu_adam_op",
        "transformer_inference_op",
    ]
    assert "deepspeed" not in sys.modules


def test_each_package_folder_is_searched_and_none_is_no_ops(tmp_path):
    first, second = tmp_path / "a" / "deepspeed", tmp_path / "b" / "deepspeed"
    (first / "ops" / "adam").mkdir(parents=True)
    (first / "ops" / "adam" / "fused_adam_op.so").write_bytes(b"")
    (second / "inference" / "v2").mkdir(parents=True)
    (second / "inference" / "v2" / "ragged_device_ops.so").write_bytes(b"")
    assert [p.name for p in contents.op_libraries([first, second])] == ["fused_adam_op.so", "ragged_device_ops.so"]
    assert contents.op_libraries([tmp_path / "missing"]) == ()
    assert contents.op_libraries([]) == ()


def test_no_deepspeed_means_no_folders(monkeypatch):
    real = contents.importlib.util.find_spec
    monkeypatch.setattr(contents.importlib.util, "find_spec", lambda name: None if name == "deepspeed" else real(name))
    assert contents.deepspeed_folders() == ()
    assert contents.op_libraries() == ()


def test_os_release_values_lose_their_quotes_and_the_first_file_found_counts(tmp_path):
    release = tmp_path / "os-release"
    release.write_text('# a comment\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n\n')
    assert contents.os_release([tmp_path / "missing", release]) == {
        "PRETTY_NAME": "Debian GNU/Linux 12 (bookworm)",
        "ID": "debian",
        "VERSION_ID": "12",
    }
    assert contents.os_release([tmp_path / "missing"]) == {}


def test_only_installed_debian_packages_are_listed(monkeypatch):
    shown = "bash\t5.2.15-2+b7\tamd64\tii \nold\t1.0\tamd64\trc \nlibc6\t2.36-9\tamd64\tii \n"

    def run(argv, **kwargs):
        assert argv[:2] == ["dpkg-query", "-W"]
        return subprocess.CompletedProcess(argv, 0, shown, "")

    monkeypatch.setattr(contents.subprocess, "run", run)
    assert contents.debian_packages() == [("bash", "5.2.15-2+b7", "amd64"), ("libc6", "2.36-9", "amd64")]


def test_a_distribution_seen_twice_counts_once_the_first_found(monkeypatch):
    class Dist:
        def __init__(self, name, version):
            self.metadata, self.version = {"Name": name}, version

    found = [
        Dist("typing_extensions", "4.15.0"),
        Dist("Typing-Extensions", "4.12.0"),
        Dist(None, "1"),
        Dist("six", "1"),
    ]
    monkeypatch.setattr(contents.importlib.metadata, "distributions", lambda: iter(found))
    assert contents.distributions() == [("typing_extensions", "4.15.0"), ("six", "1")]


def test_the_module_prints_one_line_of_json_with_this_hosts_contents(tmp_path):
    fake_deepspeed(tmp_path)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)}  # the fake DeepSpeed on the path
    shown = run_runtime_module("smoke.contents", env=env, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert len(shown.stdout.splitlines()) == 1
    found = json.loads(shown.stdout)
    assert sorted(found) == ["debs", "dists", "ops", "os"]
    assert found["os"]["ID"] == "debian"
    debs = {name: (version, arch) for name, version, arch in found["debs"]}
    dpkg = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "bash"], capture_output=True, text=True, timeout=30)
    assert debs["bash"][0] == dpkg.stdout
    dists = {name.lower(): version for name, version in found["dists"]}
    assert dists["pytest"] == pytest.__version__
    assert found["ops"] == sorted(
        ["cpu_adam_op", "transformer_inference_op", "ragged_ops", "kernelsinference_core_ops", "ragged_device_ops"]
    )
