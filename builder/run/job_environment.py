"""What a job script sets up before it launches: the modules it loads (the site's, the
runtime's, the host MPI's, a published version's), the image it runs, the wrapper that runs
it, the storage it asks for (a site's NVMe pool), the options every srun step carries and the
node-local folders made before the ranks start. Three passes, each returning a frozen record
of its part: `environment_for`, `storage_for` and `steps_for`; one clear error for a request
that cannot work.
"""

import getpass
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from .. import contract, resources
from ..errors import shown as escaped
from ..published import IMAGE, MANIFEST
from ..recipes.site_model import Site
from ..recipes.target_model import Target
from ..values.shell import cmd, env_value, leading_variable
from .job_paths import absolute, check_image, pyenv_path
from .job_request import Request, command_line_error


@dataclass(frozen=True)
class Published:
    """A published version's record (publish.json), with where it was put."""

    name: str
    version: str
    target: str
    site: str
    prefix: str  # PREFIX of PREFIX/NAME/VERSION: its modulefiles/ are there
    image: str  # where publish puts the image, which its module sets

    @property
    def module(self) -> str:
        return f"{self.name}/{self.version}"


@dataclass(frozen=True)
class Environment:
    """What the script loads and runs."""

    module_lines: tuple[str, ...] = ()  # module purge/use/load, before anything runs
    image: str = ""  # SING_IMAGE as the script sets it ("" when the module does)
    wrapper: str = ""  # the command that runs the container
    published: Published | None = None  # the version loaded (--published), when one is
    pyenv: str = ""  # SING_PYENV as the script sets it: a project env's file ("" for none)
    why: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # said on stderr: what could not be checked


def _read_record(published: str) -> Published:
    """publish.json of a published version (its folder or the file); one line when it is not."""
    path = Path(published)
    path = path / MANIFEST if path.is_dir() else path
    try:
        record = json.loads(path.read_text())
        if not all(isinstance(record.get(key), str) for key in ("name", "version", "target", "site")):
            raise ValueError
    except FileNotFoundError:
        raise command_line_error(
            f"--published {published}: no publish record there; expected the folder "
            f"PREFIX/NAME/VERSION that python -m builder publish wrote"
        ) from None
    except (OSError, ValueError):
        raise command_line_error(
            f"--published {published}: {path} is not a publish record ({MANIFEST} with name, version, target and site)"
        ) from None
    return Published(
        *(record[key] for key in ("name", "version", "target", "site")),
        prefix=str(path.resolve().parent.parent.parent),
        image=str(path.resolve().parent / IMAGE),  # where publish puts it, and its module says
    )


def environment_for(site: Site, target: Target, request: Request, launch: str) -> Environment:
    """What the script loads (modules), the image it runs and the wrapper that runs it."""
    published = None
    if request.published:
        published = _read_record(request.published)
        if (published.target, published.site) != (target.name, site.name):
            raise command_line_error(
                f"--published {request.published}: {published.module} "
                f"is {published.target} for {published.site}; this script is "
                f"{target.name} on {site.name}"
            )
    module_lines, why = _modules(site, target, launch, published)
    image, image_why = _image(site, target, request, published)
    pyenv, pyenv_why, pyenv_notes = pyenv_path(target, request)
    return Environment(
        module_lines=module_lines,
        image=image,
        wrapper=request.wrapper or ("singularity_wrapper" if published else str(resources.wrapper())),
        published=published,
        pyenv=pyenv,
        why=why + image_why + pyenv_why,
        notes=check_image(request.image, image, site, target) + pyenv_notes,
    )


def _modules(site: Site, target: Target, launch: str, published: Published | None):
    """(the module lines, why each module is loaded)."""
    lines, why = [], []
    if site.modules.purge:
        lines.append("module purge")
    loads = list(site.modules.load)
    if site.runtime.module:
        loads.append(site.runtime.module)
        why.append(f"module {site.runtime.module}: it provides {site.runtime.command} here (runtime.module)")
    if launch == "mpirun" and site.mpi.slurm_mpi == "none" and site.mpi.host_module:
        loads.append(site.mpi.host_module)
        why.append(f"module {site.mpi.host_module}: the host's mpirun (mpi.host_module)")
    if loads:
        lines.append(cmd("module", "load", *loads))
    image = target.site_image
    if image and image.module_load:  # what the site's own image runs with (LUMI: its bindings)
        lines += [cmd("module", "use", folder) for folder in image.module_use]
        lines.append(cmd("module", "load", *image.module_load))
        why.append(
            f"module {' '.join(image.module_load)}: {target.name} is built on {site.name}'s own "
            "image, which runs with it (site_image.module_load)"
        )
    if published:
        lines += [cmd("module", "use", f"{published.prefix}/modulefiles"), cmd("module", "load", published.module)]
        why.append(f"module {published.module}: the published image and its singularity_wrapper (--published)")
    return tuple(lines), tuple(why)


def _image(site: Site, target: Target, request: Request, published: Published | None):
    """(SING_IMAGE, why): --image, else the published module's (which sets it: ""), else the
    site's image folder's or images/ of the folder the script is written in; by its absolute
    path, as the job runs wherever it is submitted. Where the site runs images from one
    folder only, an image elsewhere (a published module's too) is refused."""
    image_dir = site.runtime.image_dir
    image = request.image
    if not image and not published:
        image = f"{image_dir}/{target.name}.sif" if image_dir else f"images/{target.name}.sif"
    image = absolute(image, request.folder)
    runs = image or (published.image if published else "")
    if image_dir and runs and not _in_image_dir(runs, image_dir):
        copy = f" ({site.runtime.image_copy} IMAGE)" if site.runtime.image_copy else ""
        what = f"--image {request.image}" if request.image else f"--published {request.published} (image {runs})"
        raise command_line_error(
            f"{what}: {site.name} runs images only from {image_dir}; copy "
            f"it there{copy} and give --image '{image_dir}/NAME.sif'"
        )
    why = (f"image from {image_dir}, expanded when the job runs (runtime.image_dir)",) if image_dir else ()
    return image, why


def _in_image_dir(image: str, image_dir: str) -> bool:
    """Whether the image is in the site's image folder: written with its variable, or under
    the folder it names in this shell (a login node of the site sets it)."""
    name = leading_variable(image_dir)
    if name and leading_variable(image) == name:
        return True
    folder = os.environ.get(name, "") if name else image_dir
    return bool(folder) and os.path.abspath(image).startswith(folder.rstrip("/") + "/")


# SIZE of --nvme-pool: what CSC's examples write (10G, 20GB, 100G)
POOL_SIZE = re.compile(r"[1-9][0-9]*[GT]B?")
_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


@dataclass(frozen=True)
class Storage:
    """What the job asks for beside its placement: a site's NVMe pool (--nvme-pool)."""

    sbatch: tuple[tuple[str, str], ...] = ()  # ((option, value), ...), in front of --time
    node_local: str = ""  # HPCML_NODE_LOCAL as the script sets it: where staged copies go
    why: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # said on stderr: what the pool costs

    def placed_in(self, sbatch: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
        """A placement's options with these in front of its --time."""
        if not self.sbatch:
            return sbatch
        at = next(index for index, (option, _) in enumerate(sbatch) if option == "time")
        return sbatch[:at] + self.sbatch + sbatch[at:]


def storage_for(site: Site, request: Request, gpus: int) -> Storage:
    """--nvme-pool SIZE: the site's pool (scratch.pool) asked for with --bb, --exclusive where
    the site gives it only to jobs with whole nodes, and staged copies put there. ``gpus``:
    the job's per node."""
    size = request.nvme_pool
    if not size:
        return Storage()
    pool = site.scratch.pool
    if pool is None:
        where = f"; staged data goes to {site.scratch.tmpdir} (--stage)" if site.scratch.tmpdir else ""
        raise command_line_error(f"--nvme-pool {escaped(size)}: {site.name} has no NVMe pool (scratch.pool){where}")
    if not POOL_SIZE.fullmatch(size):
        raise command_line_error(
            f"--nvme-pool {escaped(size)}: not a size; expected gigabytes or terabytes such as 100G or 2T"
        )
    path = _expand_now(pool.path, "--nvme-pool")
    asked = [("bb", '"' + pool.bb.format(size=size, path=path) + '"')]
    why = [
        f"--bb: {size} of the site's NVMe pool on each node at {pool.path} (scratch.pool); Slurm "
        f"expands no variable in an #SBATCH line, so it names {path} as written"
    ]
    notes = []
    if pool.exclusive:
        asked.insert(0, ("exclusive", ""))
        why.append("--exclusive: the pool is given only to jobs with whole nodes, billed as whole nodes")
        if gpus < site.gpu.per_node:
            notes.append(
                f"--nvme-pool needs --exclusive on {site.name}: the job is billed for all "
                f"{site.gpu.per_node} GPUs of each node, not the {gpus} it uses"
            )
    why.append(f"staged copies (--stage) go to the pool: {contract.NODE_LOCAL}={pool.path}")
    return Storage(
        sbatch=tuple(asked),
        # its variables expand when the job runs
        node_local=_VARIABLE.sub(lambda match: "${" + (match.group(1) or match.group(2)) + "}", pool.path),
        why=tuple(why),
        notes=tuple(notes),
    )


def _expand_now(text: str, option: str) -> str:
    """A site path with the variables of this shell (USER: the user writing the script)."""
    env = {"USER": getpass.getuser(), **os.environ}

    def value(match):
        name = match.group(1) or match.group(2)
        if not env.get(name):
            raise command_line_error(
                f"{option}: ${name} is not set here, and the request must name {text} with it expanded"
            )
        return env[name]

    return _VARIABLE.sub(value, text)


@dataclass(frozen=True)
class Steps:
    """What every srun step of the job starts with, and what runs before the first."""

    srun: tuple[str, ...] = ("srun",)  # across nodes, with the site's options
    lines: tuple[str, ...] = ()  # script lines before the launch: the node-local folders made
    on_exit: tuple[str, ...] = ()  # shell functions the script's EXIT trap calls
    why: tuple[str, ...] = ()


def steps_for(site: Site, nodes: int, launch: str) -> Steps:
    """The words every srun of the job starts with (across nodes, the site's
    multi_node.srun_options, which its multi_node.env may need), and the site's node-local
    folders (scratch.make_dirs): expanded by the script, handed to the container as values (the
    runtime evaluates the image's environment without the host's variables: there ${USER} and
    ${SLURM_JOB_ID} are unset), made by a first step, one task a node, and removed when the
    script ends."""
    options = site.multi_node.srun_options if nodes > 1 else ()
    if options and launch == "mpirun" and site.mpi.slurm_mpi == "none":
        raise command_line_error(
            f"--launch mpirun on {nodes} nodes: the host's mpirun starts the ranks without "
            f"srun {' '.join(options)}, which {site.name}'s multi-node jobs need "
            f"(multi_node.srun_options); use --launch srun"
        )
    srun = ("srun", *options)
    why = (
        (f"srun {' '.join(options)} on every step: the site's multi-node settings need it (multi_node.srun_options)",)
        if options
        else ()
    )
    if not site.dirs_to_make:
        return Steps(srun=srun, why=why)
    names = [name for name, _ in site.dirs_to_make]
    folders = " ".join(f'"${name}"' for name in names)
    lines = (
        "set +u  # an unset variable in a folder is empty, not an error",
        *(f"{name}={env_value(folder)}" for name, folder in site.dirs_to_make),
        "set -u",
        *(f'export APPTAINERENV_{name}="${name}" SINGULARITYENV_{name}="${name}"' for name in names),
        f"{per_node(srun)} mkdir -p {folders}",
        # node-local /tmp may be memory (LUMI): the job's caches go with the job
        f"remove_node_dirs() {{ {per_node(srun)} rm -rf {folders} || true; }}",
    )
    why += (
        f"{', '.join(names)} (scratch.make_dirs): made on every node before the ranks start, "
        "so that no two ranks race to make them, and removed when the script ends",
        f"{', '.join(names)}: given to the container as this script expands them (APPTAINERENV_, "
        "SINGULARITYENV_); the runtime clears the host's variables before the image's own run",
    )
    return Steps(srun=srun, lines=lines, on_exit=("remove_node_dirs",), why=why)


def per_node(srun: tuple[str, ...]) -> str:
    """``srun`` (a job's, Steps.srun) of one task on each node of the job, as shell text
    (--ntasks-per-node=1 alone is ignored when the job's task count, which srun inherits, is
    larger)."""
    return cmd(*srun) + ' --ntasks="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1'
