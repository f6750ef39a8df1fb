"""smoke.netcheck, the ROCm image's %test checks, proved against stand-in shared libraries built
here with gcc: a net plugin that is missing, has unresolved symbols, exports no ncclNet_v* or
maps the wrong libfabric; torch's bundled RCCL against the image's (LD_PRELOAD); libfabric with
and without the CXI provider; and a DeepSpeed build recorded with the wrong wavefront size."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from helpers import runtime_module
from helpers.shared_objects import FABRIC_SYMBOLS, gcc

sys.path.insert(0, str(ROOT / "runtime"))
import hpcml_contract as contract  # noqa: E402
from smoke import netcheck, wavefront  # noqa: E402


def script(path: Path, body: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def netcheck_run(*args, env=None, extra_pythonpath=()):
    dropped = ("NCCL_NET_PLUGIN", "LD_PRELOAD", contract.NETCHECK_SYSFS)
    return runtime_module.run("smoke.netcheck", *args, env=env, dropped=dropped, extra_pythonpath=extra_pythonpath)


def assert_ok(done, check):
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    lines = done.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"netcheck {check}: ok: "), done.stdout
    return lines[0]


def assert_fail(done, check):
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"netcheck {check}: FAIL: "), done.stderr
    return lines[0]


@pytest.fixture(scope="module")
def libs(tmp_path_factory):
    """The stand-ins, built once: image-like prefixes with libfabric, libcxi, RCCL and plugins."""
    top = tmp_path_factory.mktemp("netcheck")
    built = {"top": top}
    # libfabric with CXI built in: it NEEDs libcxi.so.1 beside it
    cxi_lib = top / "fab_builtin" / "lib"
    gcc(cxi_lib / "libcxi.so.1", "int cxil_get_device_list(void) { return 0; }\n", "libcxi.so.1")
    # (it calls into libcxi, as the real provider does: the linker keeps only libraries in use)
    built["fab_builtin"] = gcc(
        cxi_lib / "libfabric.so.1",
        FABRIC_SYMBOLS + "int cxil_get_device_list(void);\nint cxi_probe(void) { return cxil_get_device_list(); }\n",
        "libfabric.so.1",
        f"-L{cxi_lib}",
        "-l:libcxi.so.1",
        "-Wl,-rpath,$ORIGIN",
    )
    # libfabric without it
    built["fab_plain"] = gcc(top / "fab_plain" / "lib" / "libfabric.so.1", FABRIC_SYMBOLS, "libfabric.so.1")
    # libfabric without it built in, but with the DSO provider (which uses libfabric's symbols)
    dso_lib = top / "fab_dso" / "lib"
    built["fab_dso"] = gcc(dso_lib / "libfabric.so.1", FABRIC_SYMBOLS, "libfabric.so.1")
    gcc(
        dso_lib / "libfabric" / "libcxi-fi.so",
        "int fi_getinfo(void); int fi_prov_ini(void) { return fi_getinfo(); }\n",
        "libcxi-fi.so",
    )
    # ... and a DSO built against another libfabric: it does not load
    bad_dso_lib = top / "fab_bad_dso" / "lib"
    built["fab_bad_dso"] = gcc(bad_dso_lib / "libfabric.so.1", FABRIC_SYMBOLS, "libfabric.so.1")
    gcc(
        bad_dso_lib / "libfabric" / "libcxi-fi.so",
        "int fi_getinfo_v2(void); int fi_prov_ini(void) { return fi_getinfo_v2(); }\n",
        "libcxi-fi.so",
    )
    # the image's RCCL
    built["rccl"] = gcc(
        top / "rocm" / "lib" / "librccl.so.1",
        "int ncclGetVersion(int *v) { *v = 21805; return 0; } int ncclCommInitRank(void) { return 0; }\n",
        "librccl.so.1",
    )
    # plugins: complete (NEEDs the CXI libfabric), against the plain libfabric, with an
    # undefined symbol, without ncclNet_v*, and without any libfabric
    plugin_src = "int fi_getinfo(void); int ncclNet_v9 = 1; int net_init(void) { return fi_getinfo(); }\n"
    built["plugin"] = gcc(
        top / "ofi" / "librccl-net.so",
        plugin_src,
        "librccl-net.so",
        f"-L{cxi_lib}",
        "-l:libfabric.so.1",
        f"-Wl,-rpath,{cxi_lib}",
    )
    built["plugin_plain"] = gcc(
        top / "ofi_plain" / "librccl-net.so",
        plugin_src,
        "librccl-net.so",
        f"-L{built['fab_plain'].parent}",
        "-l:libfabric.so.1",
        f"-Wl,-rpath,{built['fab_plain'].parent}",
    )
    built["plugin_undefined"] = gcc(
        top / "ofi_undefined" / "librccl-net.so",
        "int fi_missing_symbol(void); int ncclNet_v9 = 1; int net_init(void) { return fi_missing_symbol(); }\n",
        "librccl-net.so",
        f"-L{cxi_lib}",
        "-l:libfabric.so.1",
        f"-Wl,-rpath,{cxi_lib}",
    )
    built["plugin_nosym"] = gcc(
        top / "ofi_nosym" / "librccl-net.so",
        "int fi_getinfo(void); int net_init(void) { return fi_getinfo(); }\n",
        "librccl-net.so",
        f"-L{cxi_lib}",
        "-l:libfabric.so.1",
        f"-Wl,-rpath,{cxi_lib}",
    )
    built["plugin_v5"] = gcc(
        top / "ofi_v5" / "librccl-net.so", "int ncclNet_v5 = 1; int ncclNet_v4 = 1;\n", "librccl-net.so"
    )
    # a torch stand-in whose HIP library NEEDs librccl.so.1, found in its own bundled/ copy
    torch_dir = top / "py" / "fake_torch"
    gcc(
        torch_dir / "lib" / "bundled" / "librccl.so.1",
        "int ncclGetVersion(int *v) { *v = 1; return 0; }\n",
        "librccl.so.1",
    )
    gcc(
        torch_dir / "lib" / "libfake_torch_hip.so",
        "int ncclGetVersion(int *v); int hip_init(void) { int v; return ncclGetVersion(&v); }\n",
        "libfake_torch_hip.so",
        f"-L{torch_dir / 'lib' / 'bundled'}",
        "-l:librccl.so.1",
        "-Wl,-rpath,$ORIGIN/bundled",
    )
    (torch_dir / "__init__.py").write_text(
        "import ctypes, os\n"
        "_hip = ctypes.CDLL(os.path.join(os.path.dirname(__file__), 'lib', 'libfake_torch_hip.so'))\n"
    )
    (top / "py" / "broken_torch.py").write_text("raise ImportError('libamdhip64.so: cannot open shared object file')\n")
    (top / "py" / "no_rccl_torch.py").write_text("x = 1\n")
    built["py"] = top / "py"
    built["bundled"] = torch_dir / "lib" / "bundled" / "librccl.so.1"
    return built


def test_gcc_is_here():
    done = subprocess.run(["gcc", "--version"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and "gcc" in done.stdout.lower()


# --- plugin -----------------------------------------------------------------------------------


def test_a_complete_plugin_passes_and_names_its_interface_and_libfabric(libs):
    line = assert_ok(
        netcheck_run(
            "plugin", "--plugin", libs["plugin"], "--rccl", libs["rccl"], "--libfabric-dir", libs["fab_builtin"].parent
        ),
        "plugin",
    )
    assert str(libs["plugin"]) in line and "ncclNet_v9" in line
    assert str(libs["fab_builtin"]) in line


def test_the_plugin_defaults_to_nccl_net_plugin(libs):
    line = assert_ok(
        netcheck_run("plugin", "--rccl", libs["rccl"], env={"NCCL_NET_PLUGIN": str(libs["plugin"])}), "plugin"
    )
    assert str(libs["plugin"]) in line


def test_no_plugin_named_anywhere_fails(libs):
    line = assert_fail(netcheck_run("plugin", "--rccl", libs["rccl"]), "plugin")
    assert "NCCL_NET_PLUGIN is not set" in line and "expected the path" in line


def test_a_missing_plugin_fails_naming_the_path_and_the_socket_fallback(libs, tmp_path):
    missing = tmp_path / "nowhere" / "librccl-net.so"
    line = assert_fail(netcheck_run("plugin", "--plugin", missing, "--rccl", libs["rccl"]), "plugin")
    assert str(missing) in line and "sockets" in line


def test_a_plugin_with_an_unresolved_symbol_fails_with_the_loaders_message(libs):
    line = assert_fail(netcheck_run("plugin", "--plugin", libs["plugin_undefined"], "--rccl", libs["rccl"]), "plugin")
    assert "undefined symbol: fi_missing_symbol" in line and str(libs["plugin_undefined"]) in line


def test_a_library_without_ncclnet_symbols_is_no_plugin(libs):
    line = assert_fail(netcheck_run("plugin", "--plugin", libs["plugin_nosym"], "--rccl", libs["rccl"]), "plugin")
    assert "exports no ncclNet_v* symbol" in line and str(libs["plugin_nosym"]) in line


def test_the_newest_exported_interface_is_reported(libs):
    line = assert_ok(netcheck_run("plugin", "--plugin", libs["plugin_v5"], "--rccl", libs["rccl"]), "plugin")
    assert "ncclNet_v5" in line and "ncclNet_v4" not in line and "libfabric: none loaded" in line


def test_a_plugin_mapping_another_libfabric_fails_naming_both(libs):
    line = assert_fail(
        netcheck_run(
            "plugin",
            "--plugin",
            libs["plugin_plain"],
            "--rccl",
            libs["rccl"],
            "--libfabric-dir",
            libs["fab_builtin"].parent,
        ),
        "plugin",
    )
    assert str(libs["fab_plain"]) in line and str(libs["fab_builtin"].parent) in line


def test_the_libfabric_dir_is_compared_through_symlinks(libs, tmp_path):
    link = tmp_path / "libfabric-link"
    link.symlink_to(libs["fab_builtin"].parent)
    assert_ok(
        netcheck_run("plugin", "--plugin", libs["plugin"], "--rccl", libs["rccl"], "--libfabric-dir", link), "plugin"
    )


def test_a_plugin_loading_no_libfabric_fails_when_one_is_expected(libs):
    line = assert_fail(
        netcheck_run(
            "plugin",
            "--plugin",
            libs["plugin_v5"],
            "--rccl",
            libs["rccl"],
            "--libfabric-dir",
            libs["fab_builtin"].parent,
        ),
        "plugin",
    )
    assert "loaded no libfabric" in line and str(libs["fab_builtin"].parent) in line


def test_an_rccl_that_does_not_load_fails_naming_it(libs, tmp_path):
    line = assert_fail(
        netcheck_run("plugin", "--plugin", libs["plugin"], "--rccl", tmp_path / "librccl.so.1"), "plugin"
    )
    assert "cannot load RCCL" in line and str(tmp_path / "librccl.so.1") in line


# --- rccl -------------------------------------------------------------------------------------


def test_torch_bundled_rccl_is_caught(libs):
    prefix = libs["rccl"].parent
    line = assert_fail(
        netcheck_run("rccl", "--prefix", prefix, "--import", "fake_torch", extra_pythonpath=[libs["py"]]), "rccl"
    )
    assert f"fake_torch loaded its bundled RCCL {libs['bundled']}" in line
    assert f"LD_PRELOAD={prefix / 'librccl.so.1'}" in line


def test_preloading_the_images_rccl_wins_by_soname(libs):
    prefix = libs["rccl"].parent
    line = assert_ok(
        netcheck_run(
            "rccl",
            "--prefix",
            prefix,
            "--import",
            "fake_torch",
            env={"LD_PRELOAD": str(libs["rccl"])},
            extra_pythonpath=[libs["py"]],
        ),
        "rccl",
    )
    assert str(libs["rccl"]) in line and "bundled" not in line


def test_a_module_that_does_not_import_fails(libs):
    line = assert_fail(
        netcheck_run(
            "rccl", "--prefix", libs["rccl"].parent, "--import", "broken_torch", extra_pythonpath=[libs["py"]]
        ),
        "rccl",
    )
    assert "cannot import broken_torch" in line and "libamdhip64.so" in line


def test_a_module_that_loads_no_rccl_fails(libs):
    line = assert_fail(
        netcheck_run(
            "rccl", "--prefix", libs["rccl"].parent, "--import", "no_rccl_torch", extra_pythonpath=[libs["py"]]
        ),
        "rccl",
    )
    assert "no_rccl_torch loaded no librccl" in line


def test_the_net_plugin_is_not_taken_for_rccl(libs, tmp_path):
    # a module that maps only librccl-net.so has loaded no RCCL
    (tmp_path / "plugin_only.py").write_text(f"import ctypes\nctypes.CDLL({str(libs['plugin_v5'])!r})\n")
    line = assert_fail(
        netcheck_run(
            "rccl", "--prefix", libs["plugin_v5"].parent, "--import", "plugin_only", extra_pythonpath=[tmp_path]
        ),
        "rccl",
    )
    assert "loaded no librccl" in line


# --- provider ---------------------------------------------------------------------------------


def test_libfabric_with_cxi_built_in_passes(libs, tmp_path):
    line = assert_ok(
        netcheck_run("provider", "--libfabric", libs["fab_builtin"], env={contract.NETCHECK_SYSFS: str(tmp_path)}),
        "provider",
    )
    assert "built in" in line and "libcxi.so.1" in line
    assert "no CXI device here, fi_info -p cxi runs on a GPU node" in line


def test_libfabric_without_cxi_fails(libs, tmp_path):
    line = assert_fail(
        netcheck_run("provider", "--libfabric", libs["fab_plain"], env={contract.NETCHECK_SYSFS: str(tmp_path)}),
        "provider",
    )
    dso = libs["fab_plain"].parent / "libfabric" / "libcxi-fi.so"
    assert f"libfabric {libs['fab_plain']} has no cxi provider" in line
    assert f"no DSO {dso}" in line and "--enable-cxi" in line


def test_libfabric_with_the_cxi_dso_passes(libs, tmp_path):
    line = assert_ok(
        netcheck_run("provider", "--libfabric", libs["fab_dso"], env={contract.NETCHECK_SYSFS: str(tmp_path)}),
        "provider",
    )
    assert f"DSO {libs['fab_dso'].parent / 'libfabric' / 'libcxi-fi.so'}" in line


def test_a_cxi_dso_that_does_not_load_fails_with_the_loaders_message(libs, tmp_path):
    line = assert_fail(
        netcheck_run("provider", "--libfabric", libs["fab_bad_dso"], env={contract.NETCHECK_SYSFS: str(tmp_path)}),
        "provider",
    )
    assert "undefined symbol: fi_getinfo_v2" in line and "libcxi-fi.so" in line


def test_a_libfabric_that_does_not_load_fails(tmp_path):
    line = assert_fail(
        netcheck_run(
            "provider", "--libfabric", tmp_path / "libfabric.so.1", env={contract.NETCHECK_SYSFS: str(tmp_path)}
        ),
        "provider",
    )
    assert f"cannot load libfabric {tmp_path / 'libfabric.so.1'}" in line


@pytest.fixture
def cxi_node(tmp_path):
    """A sysfs with one CXI device."""
    (tmp_path / "sys" / "class" / "cxi" / "cxi0").mkdir(parents=True)
    return {contract.NETCHECK_SYSFS: str(tmp_path / "sys")}


def fi_info_script(path, libdir, status, out, err=""):
    """A stand-in fi_info that insists on `-p cxi` and on ``libdir`` first on LD_LIBRARY_PATH."""
    return script(
        path,
        f'[ "$*" = "-p cxi" ] || {{ echo "wrong arguments: $*" >&2; exit 4; }}\n'
        f'case "$LD_LIBRARY_PATH" in "{libdir}"*) ;; *) echo "bad LD_LIBRARY_PATH" >&2; exit 3;; esac\n'
        f'echo "{out}"\n' + (f'echo "{err}" >&2\n' if err else "") + f"exit {status}\n",
    )


def test_on_a_cxi_node_a_failing_fi_info_fails(libs, cxi_node, tmp_path):
    fi_info = fi_info_script(tmp_path / "fi_info", libs["fab_builtin"].parent, 1, "", "fi_getinfo: -61")
    line = assert_fail(
        netcheck_run("provider", "--libfabric", libs["fab_builtin"], "--fi-info", fi_info, env=cxi_node), "provider"
    )
    assert "fi_getinfo: -61" in line and "exited 1" in line and "-p cxi" in line


def test_on_a_cxi_node_a_working_fi_info_passes(libs, cxi_node, tmp_path):
    fi_info = fi_info_script(tmp_path / "fi_info", libs["fab_builtin"].parent, 0, "    protocol: FI_PROTO_CXI")
    line = assert_ok(
        netcheck_run("provider", "--libfabric", libs["fab_builtin"], "--fi-info", fi_info, env=cxi_node), "provider"
    )
    assert "FI_PROTO_CXI" in line and "no CXI device" not in line


def test_fi_info_is_found_beside_the_library(libs, cxi_node, tmp_path):
    prefix = tmp_path / "libfabric"
    (prefix / "lib").mkdir(parents=True)
    for name in ("libfabric.so.1", "libcxi.so.1"):
        (prefix / "lib" / name).write_bytes((libs["fab_builtin"].parent / name).read_bytes())
    fi_info_script(prefix / "bin" / "fi_info", prefix / "lib", 1, "", "fi_getinfo: -61 (from beside)")
    line = assert_fail(
        netcheck_run(
            "provider", "--libfabric", prefix / "lib" / "libfabric.so.1", env={**cxi_node, "PATH": "/usr/bin:/bin"}
        ),
        "provider",
    )
    assert "(from beside)" in line and str(prefix / "bin" / "fi_info") in line


def test_a_hanging_fi_info_fails_within_its_timeout(libs, cxi_node, tmp_path):
    fi_info = script(tmp_path / "fi_info", "exec sleep 5\n")
    line = assert_fail(
        netcheck_run(
            "provider", "--libfabric", libs["fab_builtin"], "--fi-info", fi_info, "--timeout", "0.5", env=cxi_node
        ),
        "provider",
    )
    assert "did not finish in 0.5 s" in line


def test_an_empty_device_class_is_no_device(libs, tmp_path):
    (tmp_path / "class" / "cxi").mkdir(parents=True)
    fi_info = fi_info_script(tmp_path / "fi_info", libs["fab_builtin"].parent, 1, "", "never run")
    line = assert_ok(
        netcheck_run(
            "provider",
            "--libfabric",
            libs["fab_builtin"],
            "--fi-info",
            fi_info,
            env={contract.NETCHECK_SYSFS: str(tmp_path)},
        ),
        "provider",
    )
    assert "no CXI device here" in line


# --- wavefront --------------------------------------------------------------------------------


def record(tmp_path, **fields):
    path = tmp_path / "wavefront.json"
    path.write_text(json.dumps({"arch": "gfx90a", "wavefront_size": 64, "detected_by": "rocminfo stand-in", **fields}))
    return path


ROCMINFO = """ROCk module is loaded
=====================
HSA Agents
==========
*******
Agent 1
*******
  Name:                    AMD EPYC 7A53 64-Core Processor
  Marketing Name:          AMD EPYC 7A53 64-Core Processor
  Device Type:             CPU
  Wavefront Size:          0(0x0)
*******
Agent 2
*******
  Name:                    {arch}
  Marketing Name:          AMD Instinct MI250X
  Device Type:             GPU
  Wavefront Size:          {size}(0x40)
  ISA Info:
    ISA 1
      Name:                    amdgcn-amd-amdhsa--{arch}:sramecc+:xnack-
"""


def rocminfo(tmp_path, arch="gfx90a", size=64, status=0):
    text = ROCMINFO.format(arch=arch, size=size)
    return script(tmp_path / "rocminfo", f"cat <<'EOF'\n{text}EOF\nexit {status}\n")


def test_a_record_of_64_passes_and_says_no_gpu_when_rocminfo_is_absent(tmp_path):
    line = assert_ok(
        netcheck_run(
            "wavefront",
            "--record",
            record(tmp_path),
            "--arch",
            "gfx90a",
            "--expected",
            "64",
            "--rocminfo",
            tmp_path / "no-rocminfo",
        ),
        "wavefront",
    )
    assert "wavefront 64" in line and "no GPU here to compare with" in line


def test_a_record_of_32_fails_naming_both_sizes_and_the_arch(tmp_path):
    path = record(tmp_path, wavefront_size=32)
    line = assert_fail(
        netcheck_run(
            "wavefront",
            "--record",
            path,
            "--arch",
            "gfx90a",
            "--expected",
            "64",
            "--rocminfo",
            tmp_path / "no-rocminfo",
        ),
        "wavefront",
    )
    assert "-DROCM_WAVEFRONT_SIZE=32" in line and "gfx90a runs 64-wide wavefronts" in line
    assert str(path) in line


def test_a_record_for_another_arch_fails(tmp_path):
    line = assert_fail(
        netcheck_run("wavefront", "--record", record(tmp_path, arch="gfx942"), "--arch", "gfx90a", "--expected", "64"),
        "wavefront",
    )
    assert "gfx942" in line and "expected gfx90a" in line


@pytest.mark.parametrize("content", [None, "{not json", '["gfx90a", 64]', '{"arch": "gfx90a", "wavefront_size": "64"}'])
def test_a_missing_or_bad_record_fails_naming_the_file(tmp_path, content):
    path = tmp_path / "wavefront.json"
    if content is not None:
        path.write_text(content)
    line = assert_fail(netcheck_run("wavefront", "--record", path, "--arch", "gfx90a", "--expected", "64"), "wavefront")
    assert str(path) in line


def test_rocminfo_agreeing_passes(tmp_path):
    line = assert_ok(
        netcheck_run(
            "wavefront",
            "--record",
            record(tmp_path),
            "--arch",
            "gfx90a",
            "--expected",
            "64",
            "--rocminfo",
            rocminfo(tmp_path),
        ),
        "wavefront",
    )
    assert "rocminfo agrees (gfx90a, wavefront 64)" in line


def test_rocminfo_disagreeing_fails(tmp_path):
    line = assert_fail(
        netcheck_run(
            "wavefront",
            "--record",
            record(tmp_path),
            "--arch",
            "gfx90a",
            "--expected",
            "64",
            "--rocminfo",
            rocminfo(tmp_path, size=32),
        ),
        "wavefront",
    )
    assert "rocminfo reports gfx90a with 32-wide wavefronts" in line and "-DROCM_WAVEFRONT_SIZE=64" in line


def test_a_failing_rocminfo_is_skipped_and_said(tmp_path):
    # rocminfo in an image on a GPU-less host exits 1 ("Failed to get user name ... /dev/kfd")
    failing = script(tmp_path / "rocminfo", "echo 'ROCk module is NOT loaded, possibly no GPU devices' >&2\nexit 1\n")
    line = assert_ok(
        netcheck_run(
            "wavefront", "--record", record(tmp_path), "--arch", "gfx90a", "--expected", "64", "--rocminfo", failing
        ),
        "wavefront",
    )
    assert "exited 1" in line and "no GPU here to compare with" in line


def test_rocminfo_parsing_skips_cpus_marketing_names_and_isas():
    text = ROCMINFO.format(arch="gfx90a", size=64) + ROCMINFO.format(arch="gfx942", size=32).split("HSA Agents")[1]
    assert wavefront.parse_rocminfo(text) == [("gfx90a", 64), ("gfx942", 32)]
    assert wavefront.parse_rocminfo("  Name:  AMD EPYC\n  Wavefront Size:  0(0x0)\n") == []


# --- command line and the preflight's entry ---------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["plugin"],
        ["wavefront", "--record", "x", "--arch", "gfx90a"],
        ["wavefront", "--record", "x", "--arch", "gfx90a", "--expected", "many"],
        ["provider", "--libfabric", "x", "--provider", "tcp"],
        ["nosuch"],
    ],
)
def test_bad_usage_exits_2_with_one_line(argv):
    done = netcheck_run(*argv)
    assert done.returncode == 2
    assert done.stdout == "" and "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("netcheck: error: "), done.stderr


def test_run_returns_the_verdict_and_the_line(tmp_path):
    ok, line = netcheck.run(
        "wavefront",
        ["--record", record(tmp_path), "--arch", "gfx90a", "--expected", 64, "--rocminfo", tmp_path / "none"],
    )
    assert ok and line.startswith("netcheck wavefront: ok: ")
    ok, line = netcheck.run("wavefront", ["--record", tmp_path / "missing.json", "--arch", "gfx90a", "--expected", 64])
    assert not ok and line.startswith("netcheck wavefront: FAIL: ") and "missing.json" in line
    with pytest.raises(ValueError):
        netcheck.run("nosuch", [])


def test_run_times_out(libs, cxi_node, tmp_path):
    fi_info = script(tmp_path / "fi_info", "exec sleep 5\n")
    ok, line = netcheck.run(
        "provider",
        ["--libfabric", libs["fab_builtin"], "--fi-info", fi_info],
        timeout=1,
        env={**os.environ, **cxi_node},
    )
    assert not ok and line == "netcheck provider: FAIL: did not finish in 1 s"
