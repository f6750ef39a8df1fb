"""DeepSpeed with its C++/CUDA/HIP ops compiled at build time, not JIT at first use.

Emits: "deepspeed", build (DS_ACCELERATOR and a DS_BUILD_* switch per listed op; a kept step
that compiles the wheel from the sdist; its install, the wheel's sha256 recorded in the venv
for the SBOM, and the master-address fix) and final (the ops' own packages, installed here as
a top-layer block may not ask the os block; DS_ACCELERATOR=cpu for CPU images; the %tests of
the fix and of the ROCm record; %help).
Reads: target.deepspeed (.accelerator, .skip, .fix_master_address; recipes/deepspeed-ops.yaml
for the listed ops, their switches and packages; the versions.yaml pin), target.torch.flavour,
target.python.venv; target.archs (site.gpu.arch: the sm_7x BF16 note; ROCm: the arch the op
build is held to) and target.wavefront_size (ROCm: each site's `gpu: wavefront_size:`).

Example, recipes/targets/cpu.yaml, `deepspeed: {accelerator: cpu, skip: {async_io: ...,
deepspeed_ccl_comm: ...}}`, renders (containers/cpu.def, shortened):

    echo '--- build: deepspeed'
    export DS_ACCELERATOR=cpu
    export DS_BUILD_OPS=1
    export DS_BUILD_AIO=0
    export DS_BUILD_CCL_COMM=0
    export DS_BUILD_CPU_ADAGRAD=1
    ...
    kept=/mnt/kept/deepspeed-wheel-...
    ...
    pip install --no-cache-dir --no-deps "$ds_tmp"/wheel/deepspeed-*.whl
"""

from ...recipes.target_model import Target
from ...values.shell import cmd, python_check
from ..cpu_baseline import cpu_stand_in
from ..cuda_op_link import cuda_link
from ..parts import CROSS_MOUNT, Kept, Part
from ..pip_install import Request, locked, locked_lines, locked_pin
from . import os_packages

# A fixed folder (the compiled ops and the installed wheel's record name it) in the root being
# built, not in /tmp, which %post may share with the host (Apptainer binds it), where another
# build, or a failed one's leftovers, would mix into the compile.
MAKE_TMP = ('ds_tmp=/usr/src/hpcml-deepspeed && rm -rf "$ds_tmp" && mkdir -p "$ds_tmp"',)
# the same lines' folder for a compile outside a build (tests, benches: `apptainer exec` on a
# read-only image), where /tmp is the only place to write and a random name keeps runs apart
EXEC_TMP = ('ds_tmp="$(mktemp -d /tmp/hpcml-deepspeed-XXXXXX)"',)
WHEELS = '"$ds_tmp/wheel"'
SOURCE = '"$ds_tmp/src"'
# Every core, but no more compiles than there are 2 GiB of free memory for (an nvcc or hipcc
# op compile can take that much). setuptools builds that many ops at once; ninja builds each
# op's files one at a time, so the compiles never multiply.
_JOBS = (
    'jobs="$(nproc)"; mem_jobs="$(awk \'/MemAvailable/ {print int($2 / 2097152)}\' '
    '/proc/meminfo)"; if [ "$mem_jobs" -lt "$jobs" ]; then jobs="$mem_jobs"; fi; '
    'if [ "$jobs" -lt 1 ]; then jobs=1; fi'
)
# DeepSpeed's ROCm op builds take the arch from the first GPU that rocminfo reports,
# overriding PYTORCH_ROCM_ARCH, and compile -DROCM_WAVEFRONT_SIZE from its "Wavefront Size"
# line, or 32 when rocminfo fails or has no such line: on a build host without a GPU, while
# gfx90a runs 64. These tools are replaced for the build by stand-ins that report the target's
# GPU, so that a build host with (or without) a GPU cannot change either; the originals come
# back afterwards.
ROCMINFO = "/opt/rocm/bin/rocminfo"
AMDGPU_ARCH = "/opt/rocm/lib/llvm/bin/amdgpu-arch"
ROCM_ARCH_TOOLS = (ROCMINFO, AMDGPU_ARCH)
# what the build's DeepSpeed detected, kept beside the wheel and installed under the venv,
# where the image's %test reads it back
ROCM_RECORD = "rocm-build.json"
RECORD_DIR = "share/hpc-ml-runtime"
# the installed wheel's sha256 and name (a sha256sum line) beside it: pip records no hash of a
# wheel built in the image, and the SBOM gives it to DeepSpeed's component (sbom/__init__.py)
WHEEL_RECORD = "deepspeed-wheel.sha256"

# DeepSpeed's own detection, run in the unpacked source with the stand-ins in place: the
# values the op compile is about to use. A wrong one stops the build before the compile.
_DETECT = """
import json, sys; from op_builder.builder import OpBuilder as B
arch, wavefront, version, record = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
found = {"arch": B.get_rocm_gpu_arch(), "wavefront_size": int(B.get_rocm_wavefront_size())}
assert found == {"arch": arch, "wavefront_size": wavefront}, f"DeepSpeed would compile its ROCm ops for {found}; expected arch {arch} with wavefront size {wavefront}"
json.dump(dict(found, detected_by=f"deepspeed {version} op_builder at build time"), open(record, "w"), sort_keys=True); print("DeepSpeed compiles its ROCm ops for", arch, "with wavefront size", wavefront)
"""

_FIND_COMM = (
    "comm_py=\"$(python -c 'import importlib.util, os; "
    'print(os.path.join(os.path.dirname(importlib.util.find_spec("deepspeed").origin), '
    '"comm", "comm.py"))\')"'
)


# An image of another arch than x86-64 built on an x86-64 host runs its compilers under QEMU;
# that build binds x86-64 ones here (builder/host/cross_tools.py): GCC's cross compiler and
# nvcc of the image's release, which write the same code natively. Built elsewhere: not there.
_CROSS = (
    "# shellcheck source=/dev/null  # bound only by `builder build` on an x86-64 host",
    f'if [ -r {CROSS_MOUNT}/enter.sh ]; then cross={CROSS_MOUNT}; . "$cross/enter.sh"; fi',
)


def compile_commands(version, before=(), later=(), sdist=None) -> list:
    """Shell lines that compile DeepSpeed ``version`` with its ops into a wheel in WHEELS
    (the DS_BUILD_* switches set already). From the sdist, so that build_ext can take -j:
    pip would build the ops one after another. ``before``: lines run in the unpacked source
    before the compile. ``later``: DS_BUILD_* of ops made from another op's sources (they
    would share its objects), left to a second pass, alone, the others then up to date.
    ``sdist``: the lock's Pinned deepspeed, whose sha256 the downloaded sdist must have."""
    wheel = f"bdist_wheel -d {WHEELS}"
    build = [f'MAX_JOBS=1 python setup.py --quiet build_ext -j "$jobs" {wheel}']
    if later:
        off = " ".join(f"{var}=0" for var in later)
        build = [
            f'{off} MAX_JOBS=1 python setup.py --quiet build_ext -j "$jobs"',
            f'MAX_JOBS="$jobs" python setup.py --quiet build_ext {wheel}',
        ]
    return [
        f"pip download --no-deps --no-binary :all: --no-build-isolation --no-cache-dir "
        f"-d {SOURCE} deepspeed=={version}",
        *(_sha256_check(sdist, f"{SOURCE}/deepspeed-{version}.tar.gz") if sdist else ()),
        f"tar -xzf {SOURCE}/deepspeed-{version}.tar.gz -C {SOURCE}",
        f"cd {SOURCE}/deepspeed-{version}",
        *before,
        _JOBS,
        'echo "compiling the DeepSpeed ops, $jobs at a time"',
        *build,
        "cd /",
        f"rm -rf {SOURCE}",
    ]


def _ops_packages(target: Target, stage) -> list:
    """The lines that install the ops' Debian packages in ``stage``, from its lock if any."""
    packages = target.deepspeed.packages
    return list(os_packages.install(packages, os_packages.stage_lock(target, stage))) if packages else []


def _request(target: Target) -> Request:
    """The deepspeed step; a CUDA-built wheel requires nvidia-ml-py, which a lock made without torch misses."""
    cuda_only = ("nvidia-ml-py",) if target.torch.flavour == "cuda" else ()
    return Request("deepspeed", (f"deepspeed=={target.deepspeed.version}", *cuda_only), ("--no-binary=deepspeed",))


def parts(target: Target):
    """DeepSpeed's wheel with every promised op compiled in; its own test is the master-address
    fix (the smoke block's %test proves the ops: `python -m smoke deepspeed`)."""
    ds = target.deepspeed
    apt = (("DEBIAN_FRONTEND", "noninteractive"),) if ds.packages else ()
    # DS_BUILD_OPS=1 with an explicit switch per listed op: the wheel holds exactly the promise
    env = [*apt, ("DS_ACCELERATOR", ds.accelerator), ("DS_BUILD_OPS", "1"), *ds.switches]
    stand_in = cpu_stand_in(target.arch)
    # with a lock: the sdist is checked against its sha256, its dependencies come from the lock
    request = _request(target)
    from_lock = locked(target, request)
    sdist = locked_pin(target, request, "deepspeed") if from_lock else None
    compile_ops = compile_commands(ds.version, stand_in, ds.compiled_later, sdist)
    compile_ops += ["unset PYTHONPATH"] * bool(stand_in)
    saved, restored, installed, checks = '"$ds_tmp"/wheel/deepspeed-*.whl', (), (), []
    if target.torch.flavour == "rocm":
        compile_ops, extra, restored, installed, checks = _rocm_steps(target)
        saved += extra
    if target.torch.flavour == "cuda":
        compile_ops = [*cuda_link(target), *compile_ops, 'rm -rf "$ds_tmp/stubs"']
    if target.arch != "x86_64":
        compile_ops = [*_CROSS, *compile_ops]
    # the ops' own packages (libaio) go in this layer, so an op change never rebuilds the OS
    needs, final_needs = (_ops_packages(target, stage) for stage in ("build", "final"))
    # kept between builds: the compile is the slowest step of the top layer
    kept = Kept(
        name="deepspeed-wheel",
        build=(*MAKE_TMP, *needs, *compile_ops),
        save=(f'cp {saved} "$kept/"',),
        restore=(*MAKE_TMP, f'mkdir -p {WHEELS} && cp "$kept"/deepspeed-*.whl {WHEELS}/', *restored),
    )
    record = cmd(f"{target.python.venv}/{RECORD_DIR}")
    hashed = f"mkdir -p {record} && (cd {WHEELS} && sha256sum deepspeed-*.whl) > {record}/{cmd(WHEEL_RECORD)}"
    post = ['pip install --no-cache-dir "$ds_tmp"/wheel/deepspeed-*.whl', hashed, *installed, 'rm -rf "$ds_tmp"']
    if from_lock:
        post[0] = 'pip install --no-cache-dir --no-deps "$ds_tmp"/wheel/deepspeed-*.whl'
        post[:0] = locked_lines(target, request, keep=("deepspeed",))
    final_post, test = final_needs, checks
    if ds.fix_master_address:
        # DeepSpeed's MPI discovery takes rank 0's first `hostname -I` address, which on LUMI
        # and Puhti is an interface other nodes cannot reach; the host name resolves right.
        post += [_FIND_COMM, """sed -i 's/hostname -I/hostname -s/g' "$comm_py\""""]
        test += [
            _FIND_COMM,
            """if grep -q 'hostname -I' "$comm_py"; then echo "DeepSpeed still uses hostname -I" >&2; exit 1; fi""",
        ]
    final_env = (("DS_ACCELERATOR", "cpu"),) if ds.accelerator == "cpu" else ()
    notes = _notes(target)
    return [
        Part(block="deepspeed", stage="build", build_env=tuple(env), kept=kept, post=tuple(post)),
        Part(
            block="deepspeed",
            stage="final",
            build_env=apt,
            post=tuple(final_post),
            env=final_env,
            test=tuple(test),
            help=tuple(notes),
        ),
    ]


def _rocm_steps(target: Target):
    """On ROCm: the op compile with the arch tools pinned to the target's GPU, and a record of
    what it compiled for, kept with the wheel, installed and checked by %test.
    (compile lines, saved files, restore lines, install lines, test lines)."""
    ds = target.deepspeed
    arch, wavefront = target.archs[0], target.wavefront_size
    record = f"{target.python.venv}/{RECORD_DIR}/{ROCM_RECORD}"
    detect = python_check("python", _DETECT, arch, str(wavefront), ds.version) + f" {WHEELS}/{ROCM_RECORD}"
    compile_ops = (
        _replace_arch_tools(arch, wavefront)
        + compile_commands(
            ds.version, before=(f"mkdir -p {WHEELS}", detect, *cpu_stand_in(target.arch)), later=ds.compiled_later
        )
        + ["unset PYTHONPATH"]
        + _restore_arch_tools()
    )
    extra = f' "$ds_tmp"/wheel/{ROCM_RECORD}'
    restored = (f'cp "$kept"/{ROCM_RECORD} {WHEELS}/',)
    installed = (f'install -D -m 644 "$ds_tmp"/wheel/{ROCM_RECORD} {cmd(record)}',)
    # the record of what the ops were compiled for, against the GPU the image is for
    # (and, on a GPU node, against what rocminfo reports there)
    expected = ("--record", record, "--arch", arch, "--expected", str(wavefront))
    checks = [cmd("python", "-m", "smoke.netcheck", "wavefront", *expected)]
    return compile_ops, extra, restored, installed, checks


def _notes(target: Target) -> list:
    """%help: what DeepSpeed holds prebuilt, what not and why."""
    ds = target.deepspeed
    notes = [f"DeepSpeed {ds.version}, ops prebuilt (nothing compiles at run time): {', '.join(ds.promised)}."]
    by_reason = {}
    for op, reason in ds.skipped:
        by_reason.setdefault(reason, []).append(op)
    notes += [f"Not prebuilt: {', '.join(ops)} ({reason})." for reason, ops in by_reason.items()]
    majors = {int(arch[3:-1]) for arch in target.archs if arch.startswith("sm_")}
    if majors and min(majors) <= 7 < max(majors):
        # DeepSpeed drops -DBF16_AVAILABLE for every op once any arch is sm_7x
        notes.append(
            "Its CUDA ops are built without BF16 because the arch list includes sm_7x; "
            "per-site images keep BF16 on newer GPUs."
        )
    return notes


def standin_lines(arch, wavefront) -> dict:
    """{tool: its script's lines}: rocminfo answering like a node with one ``arch`` GPU, with
    the two lines DeepSpeed's op builder reads (its first gfx name, its first Wavefront Size),
    and amdgpu-arch printing the arch."""
    return {
        ROCMINFO: (
            "#!/bin/sh",
            f'echo "  Name:                    {arch}"',
            f'echo "  Wavefront Size:          {wavefront}(0x{wavefront:x})"',
        ),
        AMDGPU_ARCH: ("#!/bin/sh", f"echo {arch}"),
    }


def _replace_arch_tools(arch, wavefront):
    lines = []
    for tool, script in standin_lines(arch, wavefront).items():
        lines += [
            f"if [ -e {tool} ]; then mv {tool} {tool}.real; fi",
            f"mkdir -p {tool.rsplit('/', 1)[0]} && printf '%s\\n' {cmd(*script)} > {tool} && chmod 755 {tool}",
        ]
    return lines


def _restore_arch_tools():
    return [f"if [ -e {tool}.real ]; then mv {tool}.real {tool}; else rm -f {tool}; fi" for tool in ROCM_ARCH_TOOLS]


def _sha256_check(pin, path) -> tuple:
    """The line that fails the build when the file at ``path`` (shell words) is not the one
    the lock names."""
    return (f"printf '%s  %s\\n' {pin.hashes[0]} {path} | sha256sum --check --quiet -",)
