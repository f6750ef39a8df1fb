"""What the lumi-rocm image gets right, checked here without ROCm, a GPU or GitHub.

- The rendered %test's network checks, run as written against a stand-in image tree of
  shared libraries built with gcc: the complete one passes, each trap fails loudly.
- The rocminfo stand-in of the op build, read by DeepSpeed's own detection code (from the
  pinned DeepSpeed source distribution): 64 for gfx90a, where the old stand-in gave 32.
- A pinned source fetched at its commit, as the image's build fetches it (local git repository).
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from helpers import deffile
from helpers.shared_objects import FABRIC_SYMBOLS, gcc

DEF = (ROOT / "containers" / "lumi-rocm.def").read_text()


def final_section(kind):
    stage = [s for s in deffile.split(DEF) if s.header.get("Stage") == "final"][0]
    return stage.section(kind).body


def build_post():
    stage = [s for s in deffile.split(DEF) if s.header.get("Stage") == "build"][0]
    return stage.section("post").body


def image_env():
    """The %environment's plain assignments (name -> value)."""
    return dict(re.findall(r"^export ([A-Z_]+)=(\S+)$", final_section("environment"), re.M))


def netcheck_lines():
    return [line for line in final_section("test").splitlines() if "python -m smoke.netcheck" in line]


# --- the %test network checks against a stand-in image ----------------------------------------


def standin_image(root: Path, plugin="complete", libfabric="cxi"):
    """/opt/rocm, /opt/aws-ofi-nccl and /opt/libfabric under ``root``, as the image lays them out,
    plus a `torch` whose HIP library brings its own bundled librccl.so.1."""
    fabric = root / "opt" / "libfabric" / "lib"
    gcc(fabric / "libcxi.so.1", "int cxil_get_device_list(void) { return 0; }\n", "libcxi.so.1")
    if libfabric == "cxi":  # the CXI provider built in: libfabric needs libcxi
        gcc(
            fabric / "libfabric.so.1",
            FABRIC_SYMBOLS + "int cxil_get_device_list(void);\n"
            "int cxi_probe(void) { return cxil_get_device_list(); }\n",
            "libfabric.so.1",
            f"-L{fabric}",
            "-l:libcxi.so.1",
            "-Wl,-rpath,$ORIGIN",
        )
    else:  # the distribution's kind: no CXI provider at all
        gcc(fabric / "libfabric.so.1", FABRIC_SYMBOLS, "libfabric.so.1")
    gcc(
        root / "opt" / "rocm" / "lib" / "librccl.so.1",
        "int ncclGetVersion(int *v) { *v = 22203; return 0; }\n",
        "librccl.so.1",
    )
    calls = "fi_missing_symbol" if plugin == "unresolved" else "fi_getinfo"
    gcc(
        root / "opt" / "aws-ofi-nccl" / "lib" / "librccl-net.so",
        f"int {calls}(void); int ncclNet_v9 = 1; int net_init(void) {{ return {calls}(); }}\n",
        "librccl-net.so",
        f"-L{fabric}",
        "-l:libfabric.so.1",
        f"-Wl,-rpath,{fabric}",
    )
    if plugin == "missing":
        (root / "opt" / "aws-ofi-nccl" / "lib" / "librccl-net.so").unlink()
    torch = root / "py" / "torch"
    gcc(torch / "lib" / "librccl.so.1", "int ncclGetVersion(int *v) { *v = 1; return 0; }\n", "librccl.so.1")
    gcc(
        torch / "lib" / "libtorch_hip.so",
        "int ncclGetVersion(int *v); int hip(void) { int v; return ncclGetVersion(&v); }\n",
        "libtorch_hip.so",
        f"-L{torch / 'lib'}",
        "-l:librccl.so.1",
        "-Wl,-rpath,$ORIGIN",
    )
    (torch / "__init__.py").write_text(
        "import ctypes, os\nctypes.CDLL(os.path.join(os.path.dirname(__file__), 'lib', 'libtorch_hip.so'))\n"
    )
    record = root / "opt" / "venv" / "share" / "hpc-ml-runtime" / "rocm-build.json"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"arch": "gfx90a", "wavefront_size": 64}))
    return root


def run_image_checks(root: Path, preload=True, sysfs=None):
    """Each rendered netcheck line with the image's /opt mapped onto ``root``, in the image's
    environment (NCCL_NET_PLUGIN, LD_PRELOAD); {check: CompletedProcess}."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "LD_"))}
    for name, value in image_env().items():
        if name in ("NCCL_NET_PLUGIN", "LD_PRELOAD"):
            env[name] = value.replace("/opt/", f"{root}/opt/")
    if not preload:
        env.pop("LD_PRELOAD")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "runtime"), str(root / "py")])
    env["HPCML_NETCHECK_SYSFS"] = str(sysfs or root / "sys")  # no CXI device: build time
    env["PATH"] = f"{root / 'bin'}:{env['PATH']}"  # no rocminfo: no GPU here
    results = {}
    for line in netcheck_lines():
        argv = line.replace("python -m", f"{sys.executable} -m").replace("/opt/", f"{root}/opt/").split()
        results[argv[3]] = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    return results


def test_the_rendered_checks_cover_each_trap():
    assert sorted(line.split()[3] for line in netcheck_lines()) == ["plugin", "provider", "rccl", "wavefront"]


def test_a_complete_image_passes_every_rendered_check(tmp_path):
    results = run_image_checks(standin_image(tmp_path))
    for check, done in results.items():
        assert done.returncode == 0, (check, done.stderr)
        assert done.stdout.startswith(f"netcheck {check}: ok: ")
    assert "ncclNet_v9" in results["plugin"].stdout
    assert f"{tmp_path}/opt/libfabric/lib/libfabric.so.1" in results["plugin"].stdout


@pytest.mark.parametrize(
    "trap, check, says",
    [
        ("missing plugin", "plugin", "librccl-net.so"),
        ("unresolved symbol", "plugin", "fi_missing_symbol"),
        ("torch's bundled RCCL", "rccl", "bundled"),
        ("no CXI provider", "provider", "cxi"),
        ("wavefront 32", "wavefront", "32"),
    ],
)
def test_each_trap_fails_its_check_loudly_and_only_its_check(tmp_path, trap, check, says):
    root = standin_image(
        tmp_path,
        plugin={"missing plugin": "missing", "unresolved symbol": "unresolved"}.get(trap, "complete"),
        libfabric="distro" if trap == "no CXI provider" else "cxi",
    )
    if trap == "wavefront 32":
        (root / "opt" / "venv" / "share" / "hpc-ml-runtime" / "rocm-build.json").write_text(
            json.dumps({"arch": "gfx90a", "wavefront_size": 32})
        )
    results = run_image_checks(root, preload=trap != "torch's bundled RCCL")
    failed = {name for name, done in results.items() if done.returncode != 0}
    assert failed == {check}, {name: done.stderr for name, done in results.items()}
    line = results[check].stderr.strip()
    assert results[check].returncode == 1 and len(line.splitlines()) == 1
    assert line.startswith(f"netcheck {check}: FAIL: ") and says in line


def test_on_a_gpu_node_the_provider_check_asks_fi_info(tmp_path):
    """A node with a CXI device: fi_info -p cxi must find it (stand-in fi_info in the image's bin/)."""
    root = standin_image(tmp_path)
    sysfs = tmp_path / "sysfs"
    (sysfs / "class" / "cxi" / "cxi0").mkdir(parents=True)
    fi_info = root / "opt" / "libfabric" / "bin" / "fi_info"
    fi_info.parent.mkdir(parents=True)
    fi_info.write_text("#!/bin/sh\necho 'fi_getinfo: -61 (No data available)' >&2\nexit 1\n")
    fi_info.chmod(0o755)
    failed = run_image_checks(root, sysfs=sysfs)["provider"]
    assert failed.returncode == 1 and "-61" in failed.stderr
    fi_info.write_text("#!/bin/sh\necho 'provider: cxi'\n")
    assert run_image_checks(root, sysfs=sysfs)["provider"].returncode == 0


# --- the op build's rocminfo stand-in, read by DeepSpeed itself -------------------------------


def standin_line():
    """The build's line that writes the rocminfo stand-in, as rendered."""
    return next(line.strip() for line in build_post().splitlines() if "> /opt/rocm/bin/rocminfo &&" in line)


def detection_line():
    """The build's check of DeepSpeed's detection, with its record path as a shell word."""
    start = build_post().index("python -c 'import json, sys; from op_builder.builder")
    end = build_post().index("rocm-build.json", start) + len("rocm-build.json")
    return build_post()[start:end]


def detect(source: Path, tmp_path: Path, standin=None):
    """Write the rocminfo stand-in with the build's own line (or ``standin``, a script's text)
    into a folder on PATH, then run the rendered detection line in DeepSpeed's source. This
    machine has no /opt/rocm, so DeepSpeed takes the rocminfo on PATH."""
    assert not Path("/opt/rocm/bin/rocminfo").exists()
    tools = tmp_path / "bin"
    if standin is None:
        subprocess.run(["sh", "-c", standin_line().replace("/opt/rocm/bin", str(tools))], check=True)
    else:
        tools.mkdir()
        (tools / "rocminfo").write_text(standin)
        (tools / "rocminfo").chmod(0o755)
    wheel = tmp_path / "wheel"
    wheel.mkdir()
    line = detection_line().replace('"$ds_tmp/wheel"', str(wheel))
    done = subprocess.run(
        ["sh", "-c", line.replace("python -c", f"{sys.executable} -c", 1)],
        cwd=source,
        env=dict(os.environ, PATH=f"{tools}:{os.environ['PATH']}"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done, wheel / "rocm-build.json"


def test_deepspeed_reads_gfx90a_and_64_from_the_builds_standin(deepspeed_source, tmp_path):
    done, record = detect(deepspeed_source, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "wavefront size 64" in done.stdout
    assert json.loads(record.read_text())["wavefront_size"] == 64
    assert json.loads(record.read_text())["arch"] == "gfx90a"
    # and the image's %test accepts that record
    check = subprocess.run(
        [
            sys.executable,
            "-m",
            "smoke.netcheck",
            "wavefront",
            "--record",
            str(record),
            "--arch",
            "gfx90a",
            "--expected",
            "64",
        ],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "runtime"), PATH=str(tmp_path / "none")),
        timeout=60,
    )
    assert check.returncode == 0, check.stderr


def test_a_standin_that_only_names_the_arch_stops_the_build_before_the_compile(deepspeed_source, tmp_path):
    """The stand-in this project used before: DeepSpeed then falls back to 32, and the build's
    check refuses to compile for it."""
    done, record = detect(deepspeed_source, tmp_path, standin="#!/bin/sh\necho gfx90a\n")
    assert done.returncode != 0
    assert "'wavefront_size': 32" in done.stderr and "wavefront size 64" in done.stderr
    assert not record.exists()


# --- sources fetched at their commit -------------------------------------------------------------


def test_a_source_is_fetched_at_exactly_its_pinned_commit(tmp_path):
    from builder.recipes.target_parts import Source
    from builder.render import git_sources

    repo = tmp_path / "upstream"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "VERSION").write_text("1\n")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    first = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    (repo / "VERSION").write_text("2\n")
    subprocess.run([*git, "commit", "-qam", "two"], check=True)

    def fetch(commit):
        lines = git_sources.checkout(Source("thing", "1", str(repo), commit), '"$work"/src')
        script = "\n".join(["set -eu", f'work="{tmp_path / commit[:8]}"', *lines])
        return subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60)

    done = fetch(first)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / first[:8] / "src" / "VERSION").read_text() == "1\n"  # not the newest
    missing = fetch("0" * 40)
    assert missing.returncode != 0
