"""What a job script sets up before it launches: the modules it loads (the site's, the
runtime's, the host MPI's, a published version's), the image it runs, the wrapper that runs
it, the storage it asks for (a site's NVMe pool), the options every srun step carries and the
node-local folders made before the ranks start. Fills those parts of a jobscript Plan; one
clear error for a request that cannot work.
"""

import getpass
import json
import os
import re
from pathlib import Path

from .. import contract, resources
from ..errors import RecipeError
from ..errors import shown as escaped
from ..published import IMAGE, MANIFEST
from ..shell import cmd, env_value, leading_variable
from .job_paths import absolute, check_image


def _error(message):
    return RecipeError(message, file="command line")


def _read_record(published: str) -> dict:
    """publish.json of a published version (its folder or the file); one line when it is not."""
    path = Path(published)
    path = path / MANIFEST if path.is_dir() else path
    try:
        record = json.loads(path.read_text())
        if not all(isinstance(record.get(key), str) for key in ("name", "version", "target", "site")):
            raise ValueError
    except FileNotFoundError:
        raise _error(
            f"--published {published}: no publish record there; expected the folder "
            f"PREFIX/NAME/VERSION that python -m builder publish wrote"
        ) from None
    except (OSError, ValueError):
        raise _error(
            f"--published {published}: {path} is not a publish record ({MANIFEST} with name, version, target and site)"
        ) from None
    record["prefix"] = str(path.resolve().parent.parent.parent)
    record["image"] = str(path.resolve().parent / IMAGE)  # where publish puts it, and its module says
    return record


def environment(p):
    """What the script loads (modules), the image it runs and the wrapper that runs it."""
    site, request = p.site, p.request
    if request.published:
        p.record = record = _read_record(request.published)
        if (record["target"], record["site"]) != (p.target.name, site.name):
            raise _error(
                f"--published {request.published}: {record['name']}/{record['version']} "
                f"is {record['target']} for {record['site']}; this script is "
                f"{p.target.name} on {site.name}"
            )
    if site.modules.purge:
        p.module_lines.append("module purge")
    loads = list(site.modules.load)
    if site.runtime.module:
        loads.append(site.runtime.module)
        p.why.append(f"module {site.runtime.module}: it provides {site.runtime.command} here (runtime.module)")
    if p.launch == "mpirun" and site.mpi.slurm_mpi == "none" and site.mpi.host_module:
        loads.append(site.mpi.host_module)
        p.why.append(f"module {site.mpi.host_module}: the host's mpirun (mpi.host_module)")
    if loads:
        p.module_lines.append(cmd("module", "load", *loads))
    image = p.target.site_image
    if image and image.module_load:  # what the site's own image runs with (LUMI: its bindings)
        p.module_lines += [cmd("module", "use", folder) for folder in image.module_use]
        p.module_lines.append(cmd("module", "load", *image.module_load))
        p.why.append(
            f"module {' '.join(image.module_load)}: {p.target.name} is built on {site.name}'s own "
            "image, which runs with it (site_image.module_load)"
        )
    if p.record:
        module = f"{p.record['name']}/{p.record['version']}"
        p.module_lines += [cmd("module", "use", f"{p.record['prefix']}/modulefiles"), cmd("module", "load", module)]
        p.why.append(f"module {module}: the published image and its singularity_wrapper (--published)")
    _image(p)
    p.wrapper = request.wrapper or ("singularity_wrapper" if p.record else str(resources.wrapper()))


def _image(p):
    """SING_IMAGE: --image, else the published module's (which sets it), else the site's image
    folder's or images/ of the folder the script is written in; by its absolute path, as the
    job runs wherever it is submitted. Where the site runs images from one folder only, an
    image elsewhere (a published module's too) is refused."""
    site, request = p.site, p.request
    p.image = request.image
    if not p.image and not p.record:
        p.image = (
            f"{site.runtime.image_dir}/{p.target.name}.sif" if site.runtime.image_dir else f"images/{p.target.name}.sif"
        )
    p.image = absolute(p.image, request.folder)
    image_dir = site.runtime.image_dir
    runs = p.image or p.record.get("image", "")
    if image_dir and runs and not _in_image_dir(runs, image_dir):
        copy = f" ({site.runtime.image_copy} IMAGE)" if site.runtime.image_copy else ""
        what = f"--image {request.image}" if request.image else f"--published {request.published} (image {runs})"
        raise _error(
            f"{what}: {site.name} runs images only from {image_dir}; copy "
            f"it there{copy} and give --image '{image_dir}/NAME.sif'"
        )
    if image_dir:
        p.why.append(f"image from {image_dir}, expanded when the job runs (runtime.image_dir)")
    check_image(p)


# SIZE of --nvme-pool: what CSC's examples write (10G, 20GB, 100G)
POOL_SIZE = re.compile(r"[1-9][0-9]*[GT]B?")
_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def storage(p):
    """--nvme-pool SIZE: the site's pool (scratch.pool) asked for with --bb, --exclusive where
    the site gives it only to jobs with whole nodes, and staged copies put there."""
    site, size = p.site, p.request.nvme_pool
    if not size:
        return
    pool = site.scratch.pool
    if pool is None:
        where = f"; staged data goes to {site.scratch.tmpdir} (--stage)" if site.scratch.tmpdir else ""
        raise _error(f"--nvme-pool {escaped(size)}: {site.name} has no NVMe pool (scratch.pool){where}")
    if not POOL_SIZE.fullmatch(size):
        raise _error(f"--nvme-pool {escaped(size)}: not a size; expected gigabytes or terabytes such as 100G or 2T")
    path = _expand_now(pool.path, "--nvme-pool")
    asked = [("bb", '"' + pool.bb.format(size=size, path=path) + '"')]
    p.why.append(
        f"--bb: {size} of the site's NVMe pool on each node at {pool.path} (scratch.pool); Slurm "
        f"expands no variable in an #SBATCH line, so it names {path} as written"
    )
    if pool.exclusive:
        asked.insert(0, ("exclusive", ""))
        p.why.append("--exclusive: the pool is given only to jobs with whole nodes, billed as whole nodes")
        if p.gpus < site.gpu.per_node:
            p.notes.append(
                f"--nvme-pool needs --exclusive on {site.name}: the job is billed for all "
                f"{site.gpu.per_node} GPUs of each node, not the {p.gpus} it uses"
            )
    at = next(index for index, (option, _) in enumerate(p.sbatch) if option == "time")
    p.sbatch[at:at] = asked
    p.node_local = _VARIABLE.sub(lambda match: "${" + (match.group(1) or match.group(2)) + "}", pool.path)
    p.why.append(f"staged copies (--stage) go to the pool: {contract.NODE_LOCAL}={pool.path}")


def _expand_now(text: str, option: str) -> str:
    """A site path with the variables of this shell (USER: the user writing the script)."""
    env = {"USER": getpass.getuser(), **os.environ}

    def value(match):
        name = match.group(1) or match.group(2)
        if not env.get(name):
            raise _error(f"{option}: ${name} is not set here, and the request must name {text} with it expanded")
        return env[name]

    return _VARIABLE.sub(value, text)


def steps(p):
    """The words every srun of the job starts with (across nodes, the site's
    multi_node.srun_options, which its multi_node.env may need), and the site's node-local
    folders (scratch.make_dirs): expanded by the script, handed to the container as values (the
    runtime evaluates the image's environment without the host's variables: there ${USER} and
    ${SLURM_JOB_ID} are unset), made by a first step, one task a node, and removed when the
    script ends."""
    site, nodes = p.site, p.request.nodes
    options = site.multi_node.srun_options if nodes > 1 else ()
    if options and p.launch == "mpirun" and site.mpi.slurm_mpi == "none":
        raise _error(
            f"--launch mpirun on {nodes} nodes: the host's mpirun starts the ranks without "
            f"srun {' '.join(options)}, which {site.name}'s multi-node jobs need "
            f"(multi_node.srun_options); use --launch srun"
        )
    p.srun = ("srun", *options)
    if options:
        p.why.append(
            f"srun {' '.join(options)} on every step: the site's multi-node settings need it (multi_node.srun_options)"
        )
    if site.dirs_to_make:
        names = [name for name, _ in site.dirs_to_make]
        folders = " ".join(f'"${name}"' for name in names)
        p.launch_lines += [
            "set +u  # an unset variable in a folder is empty, not an error",
            *(f"{name}={env_value(folder)}" for name, folder in site.dirs_to_make),
            "set -u",
            *(f'export APPTAINERENV_{name}="${name}" SINGULARITYENV_{name}="${name}"' for name in names),
            f"{per_node(p)} mkdir -p {folders}",
            # node-local /tmp may be memory (LUMI): the job's caches go with the job
            f"remove_node_dirs() {{ {per_node(p)} rm -rf {folders} || true; }}",
        ]
        p.on_exit.append("remove_node_dirs")
        p.why += [
            f"{', '.join(names)} (scratch.make_dirs): made on every node before the ranks start, "
            "so that no two ranks race to make them, and removed when the script ends",
            f"{', '.join(names)}: given to the container as this script expands them (APPTAINERENV_, "
            "SINGULARITYENV_); the runtime clears the host's variables before the image's own run",
        ]


def per_node(p) -> str:
    """srun of one task on each node of the job, as shell text (--ntasks-per-node=1 alone is
    ignored when the job's task count, which srun inherits, is larger)."""
    return cmd(*p.srun) + ' --ntasks="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1'


def _in_image_dir(image: str, image_dir: str) -> bool:
    """Whether the image is in the site's image folder: written with its variable, or under
    the folder it names in this shell (a login node of the site sets it)."""
    name = leading_variable(image_dir)
    if name and leading_variable(image) == name:
        return True
    folder = os.environ.get(name, "") if name else image_dir
    return bool(folder) and os.path.abspath(image).startswith(folder.rstrip("/") + "/")
