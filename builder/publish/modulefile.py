"""Lmod (.lua) and Tcl module files for a published image, rendered from one description.

Values are quoted once, by the templates' filters (`values/lua_tcl.py`); a comment carries text only
through `values.check.comment()`, on one line. The module sets
the image, the site and the PATH of the entry-point wrappers; it conflicts only with other
versions of its own name (never with command names such as `python`) and puts nothing but
its own bin/ on PATH.
"""

import json
from dataclasses import dataclass

from .. import __version__, contract, sbom
from ..render.sitefile import GPU_FLAGS
from ..render.templating import templates
from ..values.check import comment
from ..values.lua_tcl import tcl_word
from .stackinfo import stack_versions
from .verify import SUMS

# the commands a published module puts on PATH, each running inside the image
ENTRY_POINTS = ("python", "python3", "torchrun", "deepspeed", "ds_report", "pip")


@dataclass(frozen=True)
class Module:
    name: str
    version: str
    root: str  # the published version's folder: image.sif, bin/
    site: str
    description: str
    help_text: str
    whatis: tuple  # lines
    gpu_flag: str  # --nv, --rocm or ""
    slurm_mpi: str  # Slurm's --mpi type for srun, or "" for none
    container_env: tuple  # ((NAME, value), ...) the image does not set for this site
    env_prefix: str  # APPTAINERENV_ or SINGULARITYENV_, for the site's runtime

    @property
    def heading(self) -> str:
        """The files' first comment, name/version: description, on one line; never ending in a
        backslash, which would carry a Tcl comment on to the next line (written as \\x5c)."""
        text = comment(f"{self.name}/{self.version}: {self.description}")
        return text[:-1] + "\\x5c" if text.endswith("\\") else text


def render_lua(module: Module) -> str:
    return templates.get_template("module.lua.j2").render(m=module, builder_version=__version__)


def render_tcl(module: Module) -> str:
    return templates.get_template("module.tcl.j2").render(m=module, builder_version=__version__)


def render_default(version: str) -> str:
    """`.version`: the default version, in the Tcl form that Lmod and Environment Modules read."""
    return f"#%Module\nset ModulesVersion {tcl_word(version)}\n"


def render_entry(command: str, module: str, site: str) -> str:
    """bin/<command> of a published version: runs the command inside its image."""
    return templates.get_template("entry.sh.j2").render(
        command=command, module=module, site=site, builder_version=__version__
    )


def _smoke_line(smoke, root) -> str:
    """What the module's help says of the image's smoke tests."""
    if smoke is None:
        return "NOT RUN: published with --skip-smoke. Run `python -m smoke all` in a job before trusting this module."
    machine = smoke.machine  # a report without them says "?", as it always did
    return (
        f"passed {smoke.created or '?'} on {machine.nodes or '?'} node(s), "
        f"{machine.ranks or '?'} ranks ({machine.device or '?'}); "
        f"report: {root}/{contract.SMOKE_REPORT}"
    )


def module_for(target, site, name, version, root, labels, smoke, digest, signer) -> "Module":
    """The module of a published version: its help, whatis lines and environment, from the
    target, the site, the image's labels and its SmokeReport (None: --skip-smoke), the
    image's sha256 ``digest`` and the fingerprint of the key it is signed with ("": unchecked)."""
    recipe = json.loads(labels.get("recipe", "{}"))
    versions = stack_versions(recipe, smoke.versions if smoke else {})
    baked = recipe.get("environment", {})
    container_env = tuple((k, v) for k, v in site.env if str(baked.get(k)) != v)
    built = labels.get("org.label-schema.build-date", "unknown").replace("_", " ")
    recipe_sha = labels.get("recipe.sha256", "unknown")
    tested = _smoke_line(smoke, root)
    stack = ", ".join(f"{k} {v}" for k, v in versions)
    signed = f"signed, verified against key {signer} at publish" if signer else "signature not checked at publish"
    help_text = "\n".join(
        [
            f"{name}/{version}: {target.description}",
            f"Site: {site.name} ({site.description})",
            "",
            "Commands (each runs inside the container image):",
            "  " + ", ".join(ENTRY_POINTS),
            "  singularity_wrapper exec|run|shell ...   any command, with the site's binds",
            "In a job: srun singularity_wrapper exec torchrun ... (or srun python ...)",
            "Project data: export SING_BIND=/path/to/data   (comma-separated)",
            f"Extra Python packages: pip install PKG   (into ${contract.USER_BASE}, default",
            f"  ~/.local/hpcml/{name}/{version}; the image itself is read-only)",
            "",
            f"Inside: {stack}",
            f"Image: {root}/image.sif, target {target.name}, built {built}",
            f"Image sha256: {digest} ({signed})",
            f"Recipe sha256: {recipe_sha} (full recipe: {root}/recipe.json)",
            f"Contents (SBOM, CycloneDX): {root}/{sbom.PUBLISHED}",
            f"Smoke tests: {tested}",
            f"Check the files: cd {root} && sha256sum --check --quiet {SUMS}",  # no builder needed
            *([f"Host MPI: {site.mpi.host} ({site.mpi.abi} ABI, the image's too)"] if site.mpi.host else []),
            *(f"Note: {note}" for note in site.notes),
        ]
    )
    whatis = (
        f"Name: {name}",
        f"Version: {version}",
        f"Description: {target.description}",
        f"Versions: {stack}",
        f"Built: {built}; recipe sha256 {recipe_sha}",
        f"Image: sha256 {digest}; " + (f"signing key {signer}" if signer else "signature not checked"),
        "Smoke tests: " + ("NOT RUN (--skip-smoke)" if smoke is None else "passed"),
        f"SBOM: {root}/{sbom.PUBLISHED}",
    )
    return Module(
        name=name,
        version=version,
        root=str(root),
        site=site.name,
        description=target.description,
        help_text=help_text,
        whatis=whatis,
        gpu_flag=GPU_FLAGS[site.gpu.vendor],
        slurm_mpi="" if site.mpi.slurm_mpi == "none" else site.mpi.slurm_mpi,
        container_env=container_env,
        env_prefix=f"{site.runtime.command.upper()}ENV_",
    )
