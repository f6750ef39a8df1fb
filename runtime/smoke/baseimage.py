"""`python -m smoke.baseimage FLAVOUR LABEL_PREFIX [FAIL_PREFIX]`: what a site's own image
holds, for an image built on it (a site-image target).

Such an image keeps the base's torch, collective library and MPI. Its build runs this where
DeepSpeed's ops will compile (from the runtime's wheel, before it is installed), again in
%post to put what it found in the labels, and in %test. It checks that torch imports, has
gloo, and is the FLAVOUR the target says (cpu, cuda or rocm; NCCL or RCCL with a GPU one),
and prints one label line per fact: `PREFIX.version.torch 2.10.0+rocm7.0`. A torch that does
not fit is one line on stderr, starting with FAIL_PREFIX (the builder reports that line
alone), and exit status 1.
"""

import sys

GPU_NAMES = {"cuda": "cuda", "rocm": "hip"}  # torch.version.cuda, torch.version.hip


def facts(torch, flavour: str) -> tuple:
    """(what is wrong, {fact: version}) of an imported torch for the flavour."""
    dist = torch.distributed
    gpu = {"cuda": torch.version.cuda, "rocm": torch.version.hip}
    wrong = []
    if not (dist.is_available() and dist.is_gloo_available()):
        wrong.append("torch.distributed has no gloo")
    if flavour in gpu and not (gpu[flavour] and dist.is_nccl_available()):
        wrong.append(f"torch {torch.__version__} is not a {flavour} build with NCCL/RCCL")
    if flavour == "cpu" and (torch.version.cuda or torch.version.hip):
        wrong.append(f"torch {torch.__version__} is a GPU build")
    found = {"torch": torch.__version__, "python": sys.version.split()[0]}
    if not wrong and gpu.get(flavour):
        found[GPU_NAMES[flavour]] = gpu[flavour]
        found["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    try:
        import mpi4py

        found["mpi4py"] = mpi4py.__version__
    except ImportError:
        pass
    return wrong, found


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (2, 3) or args[0] not in ("cpu", "cuda", "rocm"):
        print("baseimage: error: expected FLAVOUR (cpu, cuda or rocm) LABEL_PREFIX [FAIL_PREFIX]", file=sys.stderr)
        return 2
    flavour, prefix, fail = args[0], args[1], (args[2] if len(args) == 3 else "baseimage: ")
    try:
        import torch
        import torch.distributed  # noqa: F401  (facts reads it)
    except Exception as error:  # any import failure is the finding
        print(
            f"{fail}the image's python {sys.executable} has no working torch ({error}); expected a {flavour} torch",
            file=sys.stderr,
        )
        return 1
    wrong, found = facts(torch, flavour)
    if wrong:
        print(f"{fail}the image's torch does not fit: {'; '.join(wrong)}; expected a {flavour} torch", file=sys.stderr)
        return 1
    for name, version in found.items():
        print(f"{prefix}.version.{name} {version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
