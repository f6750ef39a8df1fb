"""What x86-64 instructions a compiled object uses, read by binutils' objdump: the check that
an image's prebuilt ops run on x86-64 nodes without AVX-512 (AMD Zen 3, LUMI's EPYC 7A53)."""

import re
import subprocess

# AVX-512 shows as its registers: zmm, the opmask registers k0-k7, or xmm/ymm 16-31 (EVEX only)
_AVX512 = re.compile(r"%zmm\d|\{%k[0-7]\}|%k[0-7]\b|%[xy]mm(1[6-9]|2\d|3[01])\b")
_AVX = re.compile(r"%ymm\d")
# ops whose AVX-512 code is chosen at run time, only on a CPU that has it: {op: the symbol of
# the choice, read in the op}. DeepSpeed compiles the shared-memory comm op's bf16/fp16
# kernels with target("avx512bw") and picks them by __builtin_cpu_supports
# (csrc/cpu/comm/shm_interface.cpp, vector_kernel_level), whatever -march says.
DISPATCHED = {"deepspeed_shm_comm_op": b"vector_kernel_level"}


def counts(path) -> dict:
    """{"avx512": instructions using AVX-512 registers, "avx": instructions using ymm}."""
    listing = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", str(path)], capture_output=True, text=True, timeout=300, check=True
    ).stdout
    lines = listing.splitlines()
    return {
        "avx512": sum(1 for line in lines if _AVX512.search(line)),
        "avx": sum(1 for line in lines if _AVX.search(line)),
    }


def copy_ops(apptainer, image, into) -> list:
    """The image's prebuilt DeepSpeed ops (every .so in its deepspeed package), copied to
    ``into``. The package is found without importing it (its import prints to stdout)."""
    where = "import importlib.util, os; print(os.path.dirname(importlib.util.find_spec('deepspeed').origin))"
    script = f'find "$(python -c "{where}")" -name "*.so" -exec cp {{}} /out/ ";"'
    done = subprocess.run(
        [str(apptainer), "exec", "--bind", f"{into}:/out", str(image), "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return sorted(into.glob("*.so"))


def unguarded_avx512(ops) -> dict:
    """{op: AVX-512 instructions} of the ops whose AVX-512 code would run on any CPU."""
    found = {}
    for op in ops:
        name = op.name.split(".")[0]
        count = counts(op)["avx512"]
        if count and not (name in DISPATCHED and DISPATCHED[name] in op.read_bytes()):
            found[name] = count
    return found
