"""The baseline CPU DeepSpeed's CPU ops are compiled for, whatever CPU builds them: the lines
the DeepSpeed block runs in the unpacked source before its compile, and the same facts for a
build outside an image (make test-gpu)."""

from ..values.shell import cmd

# DeepSpeed compiles its CPU ops (cpu_adam, async_io, ...) for the build host's CPU: with
# -march=native, and with the SIMD code py-cpuinfo (else lscpu) reports, AVX-512 on an Intel
# host, and the x86-64 host's under QEMU. An image runs elsewhere (LUMI's EPYC 7A53, Zen 3,
# has no AVX-512: SIGILL), so the compile is held to the arch's baseline: a stand-in
# py-cpuinfo reports it, and on x86-64 the build's op_builder takes a fixed -march (the
# wheel's own copy, which JIT builds on a node use, keeps -march=native). aarch64: NEON; the
# x86-64 cross compilers take -march=native as armv8-a (builder/host/cross_tools.py).
# arch: (py-cpuinfo's answer, the -march the compile takes, DeepSpeed's SIMD switch)
_CPU_BASELINE = {
    # AVX2 and FMA (x86-64-v3): Intel since Haswell (2013), every AMD Zen
    "x86_64": ('{"arch": "X86_64", "flags": "avx2"}', "-march=x86-64-v3", "-D__AVX256__"),
    "aarch64": ('{"arch": "ARM_8", "flags": ""}', None, None),
}
# what DeepSpeed's op_builder now takes, checked before the compile (neither reads self)
_CPU_DETECT = (
    "import sys; from op_builder.builder import OpBuilder as B; found = [B.cpu_arch(B), B.simd_width(B)]; "
    'assert found == sys.argv[1:], f"DeepSpeed would compile its CPU ops with {found}; expected {sys.argv[1:]}"; '
    'print("DeepSpeed compiles its CPU ops with", *found)'
)


def cpu_baseline(arch) -> dict:
    """_CPU_BASELINE's entry and the check, for a build outside an image (make test-gpu)."""
    return dict(zip(("cpuinfo", "march", "simd"), _CPU_BASELINE.get(arch, (None,) * 3)), check=_CPU_DETECT)


def cpu_stand_in(arch) -> tuple:
    """Lines run in DeepSpeed's unpacked source before the compile that make it compile for
    the baseline CPU of ``arch``; PYTHONPATH is set until the caller unsets it."""
    if arch not in _CPU_BASELINE:
        return ()
    cpuinfo, march, simd = _CPU_BASELINE[arch]
    lines = (
        'mkdir -p "$ds_tmp/cpu"',
        "printf '%s\\n' 'def get_cpu_info():' '    return " + cpuinfo + '\' > "$ds_tmp/cpu/cpuinfo.py"',
        'export PYTHONPATH="$ds_tmp/cpu"',
    )
    if march is None:
        return lines
    # one line (the definitions stay a page): the check fails the step if the sed changed nothing
    sed = cmd("sed", "-i", f"s/-march=native/{march}/", "op_builder/builder.py")
    return (*lines, f"{sed}; {cmd('python', '-c', _CPU_DETECT, march, simd)}")
