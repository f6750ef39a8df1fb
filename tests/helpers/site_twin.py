"""A twin of a site on the two-node test cluster (issue 31): Slurm shaped as the site file
says (its partitions with their node and time limits, GPU GRES of its type and count per node,
the node's cores, memory and features), Lmod with stand-ins of the modules the site's job
scripts load, and the site's image folder as a stand-in path. A job script written for the
site then runs on the twin unchanged.

What a twin proves: the script's requests are ones that site's Slurm shape accepts, what it
loads exists under those names and provides the runtime, the image is found where the site
keeps it, and every launch mode starts the ranks on one and two nodes. What it cannot: GPUs
(GRES without devices is scheduled, never used), CPU binding (no task plugin binds here),
the interconnect, accounting and QoS limits (no slurmdbd here).
"""

import os
import shutil
import stat
import subprocess
from pathlib import Path

from conftest import LMOD_INIT

from builder.values.shell import leading_variable

# The site's runtime where the site has it on every node (no module): its folder goes on
# PATH of the twin's jobs, as /usr/bin is on a real node's.
SYSTEM_RUNTIME = "system-bin"
# What the test process's own launch would leak into a job's ranks
PYTHON_LEAKS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "PYTHONPATH")
_NOT_INHERITED = ("HPCML_", "LMOD", "SING_", "BASH_FUNC_", "APPTAINERENV_", "SINGULARITYENV_")


def login_env(model, cluster) -> dict:
    """A login shell of the twin: Lmod with the site's modules, its variables, nothing of this
    project on PATH, no toolbox (the wrapper's last resort would hide a runtime the script
    failed to load)."""
    env = {
        name: value
        for name, value in cluster.env.items()
        if not name.startswith(_NOT_INHERITED) and name not in PYTHON_LEAKS
    }
    env["PATH"] = ":".join(filter(None, [model.system_path(), "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"]))
    env["MODULEPATH"] = str(model.modulefiles())
    env["XDG_CACHE_HOME"] = str(model.root / "cache")
    # the nodes' network: Open MPI's TCP transport on the bridge, not the decoys (as a site's
    # Open MPI is configured for its own network)
    env["OMPI_MCA_btl_tcp_if_include"] = f"{cluster.subnet}.0/24"
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    variable = leading_variable(model.site.runtime.image_dir)
    if variable:
        env[variable] = str(model.image_dir())
    return env


def sbatch(env, folder: Path, *argv):
    """`sbatch ARGV` from ``folder`` in that login shell, Lmod loaded as a login shell has it."""
    line = " ".join(f"'{arg}'" for arg in ["sbatch", *argv])
    return subprocess.run(
        ["bash", "-c", f"source {LMOD_INIT} && {line}"], env=env, cwd=folder, capture_output=True, text=True, timeout=60
    )


class Twin:
    def __init__(self, site, root: Path, runtime: str):
        """site: the builder's Site model; root: a folder for the twin's files; runtime: the
        real apptainer that the stand-in `singularity`/`apptainer` commands run."""
        self.site = site
        self.root = root
        self.runtime = runtime
        self.gpus = site.gpu.per_node

    # --- Slurm -------------------------------------------------------------------------------
    @property
    def cpus(self):
        return self.site.cpu.cores_per_node

    def node_options(self) -> str:
        """What each node's NodeName line adds: GPUs as GRES, memory, features."""
        site, words = self.site, []
        if self.gpus:
            kind = f"{site.slurm.gres_type}:" if site.slurm.gres_type else ""
            words.append(f"Gres=gpu:{kind}{self.gpus}")
        memory_gb = site.cpu.mem_per_gpu_gb * self.gpus if site.cpu.mem_per_gpu_gb else 256
        words.append(f"RealMemory={memory_gb * 1024}")
        if site.slurm.constraint:
            words.append(f"Features={site.slurm.constraint}")
        return " ".join(words)

    def partition_lines(self) -> list:
        """The site's partitions, the first one a job may get without naming it the default;
        none for a site file that names none (the cluster's one default partition then)."""
        parts = self.site.slurm.partitions
        if not parts:
            return []
        default = next((p.name for p in parts if p.automatic), parts[0].name)
        return [
            f"PartitionName={p.name} Nodes=ALL Default={'YES' if p.name == default else 'NO'} "
            f"MaxTime={p.max_time} MinNodes={p.min_nodes} MaxNodes={p.max_nodes} State=UP OverSubscribe=YES"
            for p in parts
        ]

    def cluster_lines(self) -> list:
        # a job beyond a partition's limits is refused when submitted, not left pending
        return ["EnforcePartLimits=ALL", *(["GresTypes=gpu"] if self.gpus else [])]

    def gres_conf(self) -> str:
        """The GPUs as stand-in devices: Slurm schedules them and nothing uses them. Slurm 22.05
        drops a GPU without a File= ("Removing file-less GPU") and refuses one that is not a
        device, so each is a character device with /dev/null's numbers (1, 3)."""
        if not self.gpus:
            return ""
        devices = self.root / "gpu-devices"
        devices.mkdir(parents=True, exist_ok=True)
        for index in range(self.gpus):
            device = devices / f"gpu{index}"
            if not device.exists():
                os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        kind = f" Type={self.site.slurm.gres_type}" if self.site.slurm.gres_type else ""
        return f"Name=gpu{kind} File={devices}/gpu[0-{self.gpus - 1}]\n"

    # --- what the site's scripts load --------------------------------------------------------
    def modulefiles(self) -> Path:
        """Stand-in Lmod modules of the names the site file says its jobs load; each provides
        the command or variable the real one does."""
        folder = self.root / "site-modules"
        folder.mkdir(parents=True, exist_ok=True)
        site = self.site
        if site.runtime.module:
            self._module(folder, site.runtime.module, prepend={"PATH": str(self._runtime_bin("runtime-bin"))})
        for name in site.modules.load:
            self._module(folder, name, setenv={f"HPCML_TWIN_{_variable(name)}": "loaded"})
        if site.mpi.host_module:
            self._module(
                folder,
                site.mpi.host_module,
                prepend={"PATH": str(Path(shutil.which("mpirun")).parent)},
                setenv={"HPCML_TWIN_HOST_MPI": site.mpi.host_module},
            )
        return folder

    def system_path(self) -> str:
        """What the twin's nodes have on PATH before any module: the runtime when the site
        has it installed on every node (no runtime.module)."""
        return "" if self.site.runtime.module else str(self._runtime_bin(SYSTEM_RUNTIME))

    def image_dir(self) -> Path:
        folder = self.root / "allowed-images"
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def _runtime_bin(self, name) -> Path:
        folder = self.root / name
        folder.mkdir(parents=True, exist_ok=True)
        command = folder / self.site.runtime.command
        if not command.exists():
            command.write_text(f'#!/bin/sh\nexec {self.runtime} "$@"\n')
            command.chmod(0o755)
        return folder

    @staticmethod
    def _module(folder, full_name, prepend=None, setenv=None):
        path = folder / f"{full_name}.lua"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [f"-- stand-in for the site's {full_name} (tests/helpers/site_twin.py)"]
        lines += [f'prepend_path("{name}", "{value}")' for name, value in (prepend or {}).items()]
        lines += [f'setenv("{name}", "{value}")' for name, value in (setenv or {}).items()]
        path.write_text("\n".join(lines) + "\n")


def _variable(module_name):
    return "".join(c if c.isalnum() else "_" for c in module_name.split("/")[0]).upper()
