"""Labels that say where an image came from, with the resolved recipe embedded.

Emits: "provenance", final only (first of the top layer): %labels (builder version, target,
sites, CPU and GPU archs, recipe hash, stage images, pinned versions, promised DeepSpeed ops,
the resolved recipe as JSON), %post lines that drop the build host's inherited labels and (GPU
images) add the measured ones (`smoke.labels`), and %help.
Reads: target.name, description, stages, arch, torch.version and .flavour, deepspeed.version and
.promised, mpi.mpi4py, python.packages, .build_tools and .venv, comm.plugin, and target.resolved
(the whole recipe); of each site, site.name and site.gpu.arch (through target.archs).

Example, recipes/targets/a100-cuda.yaml (`sites: [karolina, jean-zay, mahti]`, all sm_80)
renders (containers/a100-cuda.def, shortened):

    %labels
    org.hpc-ml-containers.builder.version 0.1.0
    org.hpc-ml-containers.target a100-cuda
    org.hpc-ml-containers.sites karolina,jean-zay,mahti
    org.hpc-ml-containers.gpu.arch sm_80
    ...
    org.hpc-ml-containers.version.torch 2.14.1
"""

import hashlib
import json

from ... import __version__
from ...labels import LABEL_PREFIX
from ...recipes.target_model import Target
from ...values.shell import cmd
from ..parts import Part

# `apptainer build` names the file in APPTAINER_LABELS, SingularityCE in SINGULARITY_LABELS
_LABELS_FILE = '"${APPTAINER_LABELS:-${SINGULARITY_LABELS:-/dev/null}}"'
# The labels a layer inherits from the one below; a debootstrap layer's name the build host's
# Debian mirror (a fact of the build machine, a site's own mirror on a site), so the shipped
# image drops it.
_INHERITED_LABELS = "/.singularity.d/labels.json"
_HOST_LABELS = ("org.label-schema.usage.singularity.deffile.mirrorurl",)
_DROP_LABELS = (
    "import json, sys; path = sys.argv[1]; labels = json.load(open(path)); "
    "[labels.pop(key, None) for key in sys.argv[2:]]; "
    'json.dump(labels, open(path, "w"), indent=1, sort_keys=True)'
)


def measured_labels(command: str) -> tuple:
    """%post lines that add the label lines ``command`` prints to the image's labels; an
    assignment first, so that a failing measurement stops the build (no pipefail in sh)."""
    return (f'measured="$({command})"', f"printf '%s\\n' \"$measured\" | tee -a {_LABELS_FILE}")


def recipe_json(target: Target) -> str:
    return json.dumps(target.resolved, sort_keys=True, separators=(",", ":"))


def recipe_hash(target: Target) -> str:
    return hashlib.sha256(recipe_json(target).encode()).hexdigest()


def parts(target: Target):
    labels = [
        ("builder.version", __version__),
        ("target", target.name),
        ("sites", ",".join(site.name for site in target.sites)),
        ("arch", target.arch),
        ("gpu.arch", ",".join(target.archs) or "none"),
        ("recipe.sha256", recipe_hash(target)),
    ]
    labels += [(f"image.{stage.name}", f"{stage.bootstrap}:{stage.image}") for stage in target.stages]
    # a site's image has its own torch and build tools: the site_image block measures them
    pinned = [("torch", target.torch.version)] if target.torch.version else []
    pinned.append(("deepspeed", target.deepspeed.version))
    if target.mpi.mpi4py:
        pinned.append(("mpi4py", target.mpi.mpi4py))
    pinned += list(target.python.packages) + ([] if target.site_image else list(target.python.build_tools))
    if target.comm.plugin is not None:
        pinned.append((target.comm.plugin.name, target.comm.plugin.version))
    labels += [(f"version.{name}", version) for name, version in pinned]
    # what `ds_report` must show installed, no more and no less (checked by `smoke deepspeed`)
    labels.append(("deepspeed.ops", ",".join(target.deepspeed.promised)))
    labels.append(("recipe", recipe_json(target)))
    python = f"{target.python.venv}/bin/python"
    post = (f"[ ! -f {_INHERITED_LABELS} ] || " + cmd(python, "-c", _DROP_LABELS, _INHERITED_LABELS, *_HOST_LABELS),)
    if target.torch.flavour != "cpu":
        # an assignment, so that a failing measurement stops the build (no pipefail in sh)
        post += measured_labels(cmd(python, "-m", "smoke.labels", LABEL_PREFIX))
    return [
        Part(
            block="provenance",
            stage="final",
            post=post,
            labels=tuple((f"{LABEL_PREFIX}.{key}", value) for key, value in labels),
            help=(
                f"{target.name}: {target.description}",
                f"Built for: {', '.join(s.name for s in target.sites)}; CPU arch: {target.arch}; "
                f"GPU arch: {', '.join(target.archs) or 'none'}.",
                f"The resolved recipe is in the label {LABEL_PREFIX}.recipe (apptainer inspect --labels IMAGE).",
            ),
        )
    ]
