"""The CSCS Container Engine's Environment Definition File (EDF, TOML) for an exported image:
`image` names the enroot squashfs, `workdir` and `mounts` follow CSCS's quick start (the user's
scratch), `[env]` is the image's environment, and CUDA images ask for the AWS OFI NCCL hook.

Keys and values as CSCS documents them:
https://docs.cscs.ch/software/container-engine/edf/ (image, workdir, mounts, env, annotations)
https://docs.cscs.ch/software/container-engine/resource-hook/#aws-ofi-nccl-hook (the hook)
https://docs.cscs.ch/software/container-engine/known-issue/ (libcudart.so and the cuda-dl variant)
"""

from .. import __version__
from ..values import toml
from ..values.check import comment
from . import metadata

# CSCS's quick start: the user's scratch, bound at the same path, is where the job starts.
WORKDIR = "${SCRATCH}"
MOUNTS = ("${SCRATCH}:${SCRATCH}",)
HOOK = "com.hooks.aws_ofi_nccl"
# Variants CSCS configures for NVIDIA nodes, linked statically against one CUDA major. Their
# `cuda-dl` variant, linked dynamically, needs a libcudart.so on the library path, which images
# with PyPI's torch lack (torch finds its CUDA runtime in site-packages); so a CUDA image gets
# the variant of its own CUDA major, from the host's network stack (the known-issue page's fix).
CUDA_VARIANTS = {"12": "cuda12", "13": "cuda13"}
FALLBACK_VARIANT = "cuda-dl"  # CSCS's general recommendation, for a CUDA major it has no variant of


def text(meta: metadata.ImageMetadata, image: str) -> str:
    """The EDF for ``meta``'s image, whose squashfs will be at ``image`` on the site. Every
    value is a TOML string (`values.toml`); a comment carries text only through
    `values.check.comment()`, on one line."""
    target, created = comment(meta.target), comment(meta.created)
    lines = [
        f"# CSCS Container Engine environment for {target}, written by hpcml export ({__version__})",
        f"# from {target}.sif" + (f", built {created}" if created else "") + ".",
        f"# Copy it to ~/.edf/{target}.toml; then: srun --environment={target} python ...",
        "# Keys: https://docs.cscs.ch/software/container-engine/edf/",
        f"image = {toml.string(image)}",
        f"workdir = {toml.string(WORKDIR)}",
        "mounts = [" + ", ".join(toml.string(mount) for mount in MOUNTS) + "]",
        "",
        "# The image's environment (its %environment); `$$` is a literal `$` to the Container Engine.",
        "[env]",
        *(f"{toml.key(name)} = {toml.string(literal(value))}" for name, value in meta.environment.items()),
    ]
    hook = annotations(meta)
    if hook:
        lines += ["", _why_annotations(meta), "[annotations]"]
        lines += [f"{'.'.join(map(toml.key, name.split('.')))} = {toml.string(value)}" for name, value in hook.items()]
    return "\n".join(lines) + "\n"


def annotations(meta: metadata.ImageMetadata) -> dict:
    """The AWS OFI NCCL hook's annotations for a CUDA image; none for CPU and ROCm images (a CPU
    image has no NCCL; a ROCm image brings its own aws-ofi-nccl plugin and libfabric, built
    for RCCL, and CSCS's rocm variants are for its own ROCm versions)."""
    if meta.image_labels.flavour != "cuda":
        return {}
    major = meta.image_labels.short("cuda.runtime").split(".")[0]
    variant = CUDA_VARIANTS.get(major)
    if variant is None:
        return {f"{HOOK}.enabled": "true", f"{HOOK}.variant": FALLBACK_VARIANT}
    return {"com.hooks.netstack.source": "host", f"{HOOK}.enabled": "true", f"{HOOK}.variant": variant}


def _why_annotations(meta) -> str:
    runtime = comment(meta.image_labels.short("cuda.runtime") or "unknown")
    return (
        f"# NCCL over Slingshot: the AWS OFI NCCL hook, the variant of the image's CUDA ({runtime}).\n"
        "# https://docs.cscs.ch/software/container-engine/resource-hook/#aws-ofi-nccl-hook"
    )


def literal(value: str) -> str:
    """The Container Engine expands ${VAR} in every value; the image's values are meant as written."""
    return value.replace("$", "$$")
