"""What a site-image target's base already holds, read instead of installed.

A site-image target (`site_image: true`) starts both stages of its one layer from the site's
own image (the site file's `site_image.path`, LUMI AI Factory's on LUMI). Its torch, collective
library and MPI are the base's, never installed: the block reads them where the ops compile (a
wrong torch stops the build there, in one marked line), labels the image with them and checks
them again in %test. pip's build tools for DeepSpeed go in only where the base lacks them, at
versions.yaml's pins.

Emits: "site_image", build (the venv on PATH, the GPU arch variable, the check of the base,
the build tools it lacks) and final (the venv on PATH in %environment, after a copy of the
base's; the measured labels in %post; the check in %test; %help). The base's runscript stays.
Reads: target.site_image (the first site's site_image: path, venv), target.torch.flavour,
target.python.build_tools, target.archs (the arch variable, as the torch block sets it).

Example, recipes/targets/lumi-laif.yaml (`site_image: true`, `torch: {flavour: rocm}`;
recipes/sites/lumi.yaml names the image) renders (containers/lumi-laif.def, shortened):

    From: /appl/local/laifs/containers/.../lumi-multitorch-full-u24r70f21m50t210-20260807_115122.sif
    ...
    echo '--- build: site_image'
    export VIRTUAL_ENV=/opt/venv
    export PATH="/opt/venv/bin:${PATH}"
    export PYTORCH_ROCM_ARCH=gfx90a
    PYTHONPATH=/opt/hpcml-runtime/hpc_ml_runtime-0.1.0-py3-none-any.whl python -m smoke.baseimage rocm ...
    ...
    pip show ninja >/dev/null 2>&1 || pip install --no-cache-dir ninja==1.13.0
"""

from ... import contract
from ...labels import LABEL_PREFIX
from ...recipes.target_model import Target
from ...values.shell import cmd
from .. import runtime_wheel
from ..parts import Part
from . import runtime
from .provenance import measured_labels
from .python import venv_env
from .torch import arch_env

# Apptainer writes an image's %environment to this file after %post, over the base's; sourced
# in name order, a copy under an earlier name keeps the base's settings (ROCm's paths), ours after
_BASE_ENV = "/.singularity.d/env/90-environment.sh"
_KEPT_ENV = "/.singularity.d/env/89-site-image-environment.sh"


def parts(target: Target):
    image = target.site_image
    if image is None:
        return []
    # runtime/smoke/baseimage.py: torch is the flavour the target says; its facts as label lines
    args = ("-m", "smoke.baseimage", target.torch.flavour, LABEL_PREFIX, contract.FAILURE_MARKER)
    check = cmd("python", *args)  # where the venv is on PATH: the build stage, %test
    in_final_post = cmd(f"{image.venv}/bin/python", *args)  # %post of the final stage has no venv on PATH
    # in the build stage it runs from the runtime's wheel, staged there but not yet installed
    staged = f"{runtime.STAGING}/{runtime_wheel.current().name}"
    # on PATH while building and when the image runs, as our own images have it; the base's
    # runscript stays its own
    path = venv_env(image.venv)
    tools = [
        f"pip show {name} >/dev/null 2>&1 || " + cmd("pip", "install", "--no-cache-dir", f"{name}=={version}")
        for name, version in target.python.build_tools
    ]
    return [
        Part(
            block="site_image",
            stage="build",
            build_env=(*path, *arch_env(target)),
            post=(f"PYTHONPATH={cmd(staged)} {check}", *tools),
        ),
        Part(
            block="site_image",
            stage="final",
            env=(*path, *arch_env(target)),
            post=(
                # the image's %environment replaces the base's file; keep the base's before it
                f"if [ -f {_BASE_ENV} ]; then cp {_BASE_ENV} {_KEPT_ENV}; fi",
                *measured_labels(in_final_post),
            ),
            test=(check,),
            help=(
                f"Built on the site's own image {image.path}: its torch, communication library and "
                "MPI are the base's (their versions are in the labels version.*).",
            ),
        ),
    ]
