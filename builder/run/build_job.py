"""Where a site-image target is built when this host cannot build it well: a login node with
no privilege (build routes `proot` and `unpacked`, as on LUMI) gets the Slurm job its site's
file describes (site_image.build_job). CSC's guide to containers on LUMI builds large images
in a job on a compute node, whose /tmp is memory: the job asks for twice the image's
uncompressed size, worked out here from the site's image file.

    advice(tree.target("lumi-laif"), apptainer) ->
      Advice(sbatch="sbatch -p small -c 16 --mem=62G -t 04:00:00 --wrap '...'", memory="62 GB: ...")
"""

import math
import shlex
from dataclasses import dataclass
from pathlib import Path

from ..errors import ToolError
from ..host import sif
from ..invocation import program
from ..recipes.target_model import Target

MIN_MEMORY_GB = 8


@dataclass(frozen=True)
class Advice:
    sbatch: str  # the command that builds the target in a job, or "" when it cannot be said
    memory: str  # how much memory the job asks for and why, or why it cannot be said


def advice(target: Target, apptainer) -> Advice | None:
    """The job that builds ``target``, or None when its site names none."""
    image = target.site_image
    job = image.build_job if image else None
    if job is None:
        return None
    try:
        size = uncompressed_bytes(apptainer, Path(image.path))
    except (OSError, ToolError):
        return Advice("", f"unknown: the site's image {image.path} is not readable on this host")
    memory = max(MIN_MEMORY_GB, math.ceil(2 * size / 1e9))
    modules = f"module load {' '.join(job.modules)} && " if job.modules else ""
    build = f"{modules}APPTAINER_TMPDIR={shlex.quote(job.tmpdir)} {program()} build {target.name}"
    sbatch = f"sbatch -p {job.partition} -c {job.cpus} --mem={memory}G -t {job.time} --wrap {shlex.quote(build)}"
    why = (
        f"{memory} GB, the build's temporary folders in {job.tmpdir} (node memory): twice the "
        f"uncompressed {size / 1e9:.1f} GB of {image.path} ({job.source}, read {job.read})"
    )
    return Advice(sbatch, why)


def uncompressed_bytes(apptainer, image: Path) -> int:
    """The sum of the sizes of the image's files (its squashfs listing; nothing unpacked)."""
    if not image.is_file():
        raise ToolError(f"{image}: no such file")
    return sum(size for mode, size in sif.sizes(sif.root_partition(apptainer, image)) if mode.startswith("-"))
