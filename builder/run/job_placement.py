"""Where a job goes on its site: its size, partition, QoS, account and resources, each in the
site's own form; one clear error for a request the site cannot serve. One pass,
`placement_for`, made of three steps that each take the Placement so far and return it with
their part filled in: `size`, then `choose_partition`, then `resources`."""

import re
from dataclasses import dataclass, replace

from ..errors import did_you_mean
from ..errors import shown as escaped
from ..recipes.site_model import Site
from ..recipes.slurm_model import Partition, Qos
from ..recipes.target_model import Target
from ..values.check import SLURM_NAME, SLURM_NAME_EXPECTED, field, single_line
from .job_request import Request, command_line_error, seconds, shown


@dataclass(frozen=True)
class Placement:
    """How big the job is on each node, where it goes and what it asks Slurm for."""

    gpus: int = 0  # per node
    ranks_per_node: int = 1
    tasks_per_node: int = 1  # Slurm tasks: 1 under torchrun and the one-node launcher
    cores_per_rank: int = 1
    partition: Partition | None = None  # None: the cluster's default
    mem: str = ""  # --mem value, "" for none
    sbatch: tuple[tuple[str, str], ...] = ()  # ((option, value), ...) in the script's order
    why: tuple[str, ...] = ()  # for the script's comment block: what was chosen, why

    @property
    def cpus_per_task(self) -> int:
        return self.cores_per_rank * self.ranks_per_node // self.tasks_per_node


def placement_for(site: Site, target: Target, request: Request, launch: str) -> Placement:
    """The whole placement of a job; ``request`` has its time filled in."""
    sized = size(site, request, launch)
    return resources(site, target, request, choose_partition(site, request, sized))


def size(site: Site, request: Request, launch: str) -> Placement:
    """GPUs, ranks and Slurm tasks per node, and the cores of each rank."""
    if site.gpu.per_node:
        if request.tasks_per_node:
            raise command_line_error(
                f"--tasks-per-node: on {site.name} ranks follow the GPUs (one per GPU); use --gpus"
            )
        gpus = request.gpus or site.gpu.per_node
        if not 1 <= gpus <= site.gpu.per_node:
            raise command_line_error(f"--gpus {request.gpus}: {site.name} has {site.gpu.per_node} GPUs per node")
        ranks = gpus
        cores = site.cpu.cores_per_gpu or site.cpu.cores_per_node // site.gpu.per_node
        why = (
            f"{gpus} GPU(s) per node, one rank each, {cores} cores per rank "
            f"({'cpu.cores_per_gpu' if site.cpu.cores_per_gpu else 'the node shared out'})"
        )
    else:
        if request.gpus:
            raise command_line_error(f"--gpus {request.gpus}: site {site.name} has no GPUs")
        gpus, ranks = 0, request.tasks_per_node or 1
        if ranks > site.cpu.cores_per_node:
            raise command_line_error(
                f"--tasks-per-node {ranks}: {site.name} has {site.cpu.cores_per_node} cores per node"
            )
        cores = site.cpu.cores_per_node // ranks
        why = f"{ranks} rank(s) per node on CPU, {cores} cores each"
    whole = gpus == site.gpu.per_node if site.gpu.per_node else True
    if launch == "torchrun" and request.nodes > 1 and not whole:
        raise command_line_error(
            f"--gpus {gpus} on {request.nodes} nodes with torchrun: a multi-node "
            f"torchrun job takes whole nodes ({site.gpu.per_node} GPUs); use --launch srun "
            f"for part of each node"
        )
    single_task = launch == "torchrun" or (launch == "deepspeed" and request.nodes == 1)
    return Placement(
        gpus=gpus,
        ranks_per_node=ranks,
        tasks_per_node=1 if single_task else ranks,
        cores_per_rank=cores,
        why=(why,),
    )


def _fits(site: Site, request: Request, sized: Placement, partition: Partition):
    """None when the job fits ``partition``, else why not."""
    nodes, gpus = request.nodes, sized.gpus
    if nodes > partition.max_nodes:
        return f"{nodes} nodes > {partition.max_nodes}"
    if nodes < partition.min_nodes:
        return f"{nodes} nodes < {partition.min_nodes}"
    if seconds(request.time) > seconds(partition.max_time, "max_time"):
        return f"--time {shown(request.time)} > {shown(partition.max_time)}"
    if site.gpu.per_node and gpus > partition.max_gpus:
        return f"{gpus} GPUs per node > {partition.max_gpus}"
    job_gpus = nodes * gpus
    if site.gpu.per_node and partition.max_job_gpus and job_gpus > partition.max_job_gpus:
        return f"{job_gpus} GPUs per job > {partition.max_job_gpus}"
    if site.gpu.per_node and job_gpus < partition.min_job_gpus:
        return f"{job_gpus} GPUs per job < {partition.min_job_gpus}"
    if partition.whole_nodes and site.gpu.per_node and gpus < site.gpu.per_node:
        return "whole nodes only"
    return None


def _first_fit(site: Site, request: Request, sized: Placement):
    """(the first of the site's partitions given without being named that fits the job, or
    None; why each one before it did not)."""
    refused = []
    for part in site.slurm.partitions:
        if not part.automatic:
            continue
        why_not = _fits(site, request, sized, part)
        if why_not is None:
            return part, refused
        refused.append(f"{part.name}: {why_not}")
    return None, refused


def _named_partition(site: Site, request: Request, sized: Placement) -> Partition:
    """The partition the user named, when it takes this job; else one line, which names a
    partition that would take it where one does."""
    partitions = {part.name: part for part in site.slurm.partitions}
    asked = request.partition
    chosen = partitions.get(asked)
    if chosen is None:
        known = ", ".join(partitions) or "none (the cluster's default is used)"
        raise command_line_error(
            f"--partition {escaped(asked)}: not a partition of {site.name}; expected one of: {known}"
        )
    why_not = _fits(site, request, sized, chosen)
    if why_not:
        other, _ = _first_fit(site, request, sized)
        instead = f"; {other.name} takes it" if other else ""
        raise command_line_error(f"--partition {chosen.name} does not fit this job ({why_not}){instead}")
    return chosen


def choose_partition(site: Site, request: Request, sized: Placement) -> Placement:
    """``sized`` with its partition: the one named, else the first of the site's that fits."""
    seconds(request.time)
    if request.partition:
        chosen = _named_partition(site, request, sized)
        return _noting(sized, f"partition {_noted(chosen)}: as asked", partition=chosen)
    if not site.slurm.partitions:
        return _noting(sized, "partition: the cluster's default (the site file names none)")
    part, refused = _first_fit(site, request, sized)
    if part is None:
        gpus = sized.gpus
        raise command_line_error(
            f"no partition of {site.name} fits {request.nodes} node(s) x {gpus or sized.ranks_per_node} "
            f"{'GPUs' if gpus else 'ranks'} for {shown(request.time)} ({'; '.join(refused)})"
        )
    skipped = f"; skipped {', '.join(refused)}" if refused else ""
    return _noting(sized, f"partition {_noted(part)}: the first of the site's that fits{skipped}", partition=part)


def _noting(placed: Placement, *why: str, **changes) -> Placement:
    """``placed`` with ``changes`` and more reasons."""
    return replace(placed, why=placed.why + why, **changes)


def _noted(part: Partition) -> str:
    """A partition's name for the script's comments, with its note where it has one."""
    return f"{part.name} ({part.note})" if part.note else part.name


def _qos_misfit(request: Request, gpus: int, qos: Qos):
    """None when the job, ``gpus`` per node, fits ``qos``'s limits, else why not."""
    job_gpus = request.nodes * gpus
    if qos.max_time and seconds(request.time) > seconds(qos.max_time, "max_time"):
        return f"--time {shown(request.time)} > {shown(qos.max_time)}"
    if qos.max_gpus and job_gpus > qos.max_gpus:
        return f"{job_gpus} GPUs > {qos.max_gpus}"
    return None


def _choose_qos(site: Site, request: Request, gpus: int) -> tuple[str, tuple[str, ...]]:
    """(the QoS asked for, or the first of the site's (test ones only when named) that fits,
    "" for none; why)."""
    asked = request.qos
    if asked:
        known = {qos.name: qos for qos in site.slurm.qos}
        if asked not in known:
            raise command_line_error(
                f"--qos {escaped(asked)}: not a QoS of {site.name}; expected one of: "
                f"{', '.join(known) or 'none (the site file names none)'}" + did_you_mean(asked, known)
            )
        why_not = _qos_misfit(request, gpus, known[asked])
        if why_not:
            raise command_line_error(f"--qos {asked} does not fit this job ({why_not})")
        return asked, (f"QoS {asked}: as asked",)
    if not site.slurm.qos:
        return "", ()
    refused = []
    for qos in site.slurm.qos:
        if qos.test:
            continue
        why_not = _qos_misfit(request, gpus, qos)
        if why_not is None:
            if len(site.slurm.qos) == 1:  # the site's only one: nothing was chosen
                return qos.name, ()
            skipped = f"; skipped {', '.join(refused)}" if refused else ""
            return qos.name, (f"QoS {qos.name}: the first of the site's that fits{skipped}",)
        refused.append(f"{qos.name}: {why_not}")
    raise command_line_error(
        f"no QoS of {site.name} fits {request.nodes * gpus} GPUs for {shown(request.time)} ({'; '.join(refused)})"
    )


def _account(site: Site, asked: str) -> str:
    """The project to bill, checked against the site's form; one line when a site that
    requires one gets none."""
    form = site.slurm.account
    if not asked:
        if form and form.required:
            raise command_line_error(
                f"--account is required on {site.name}: the project to bill, such as {form.example}"
            )
        return ""
    single_line(asked, "--account")
    if not form:  # the site gives no form: the default set, which no directive can hide in
        return field(asked, "--account", SLURM_NAME, f"a Slurm account: {SLURM_NAME_EXPECTED}")
    if not re.fullmatch(form.pattern, asked):
        raise command_line_error(
            f"--account {escaped(asked)}: not of {site.name}'s form; expected one such as "
            f"{form.example} (matching {form.pattern})"
        )
    return asked


def resources(site: Site, target: Target, request: Request, placed: Placement) -> Placement:
    """``placed`` (sized, its partition chosen) with its memory and its #SBATCH options."""
    why = []
    sbatch = [("job-name", target.name)]
    account = _account(site, request.account)
    if account:
        sbatch.append(("account", account))
    if placed.partition:
        sbatch.append(("partition", placed.partition.name))
    sbatch += [
        ("nodes", str(request.nodes)),
        ("ntasks-per-node", str(placed.tasks_per_node)),
        ("cpus-per-task", str(placed.cpus_per_task)),
    ]
    gpus, mem = placed.gpus, ""
    if gpus:
        if site.slurm.gpu_request == "gpus-per-node":
            sbatch.append(("gpus-per-node", str(gpus)))
        else:
            kind = f"{site.slurm.gres_type}:" if site.slurm.gres_type else ""
            sbatch.append(("gres", f"gpu:{kind}{gpus}"))
        why.append(f"GPUs asked as --{sbatch[-1][0]} (slurm.gpu_request: {site.slurm.gpu_request})")
    if site.slurm.mem == "per_gpu" and gpus and site.cpu.mem_per_gpu_gb:
        mem = f"{site.cpu.mem_per_gpu_gb * gpus}G"
        why.append(f"memory {mem}: {site.cpu.mem_per_gpu_gb} GB per GPU (slurm.mem: per_gpu)")
    elif site.slurm.mem == "whole_node" and (not site.gpu.per_node or gpus == site.gpu.per_node):
        mem = "0"
        why.append("memory: all of each node, --mem=0 (slurm.mem: whole_node)")
    if mem:
        sbatch.append(("mem", mem))
    qos, qos_why = _choose_qos(site, request, gpus)
    why += qos_why
    if qos:
        sbatch.append(("qos", qos))
    if site.slurm.constraint:
        sbatch.append(("constraint", site.slurm.constraint))
    for option in site.slurm.sbatch:
        name, _, value = option[2:].partition("=")
        sbatch.append((name, value))
    # as the user wrote it: Slurm reads every form alike, and it matches the header's command line
    sbatch.append(("time", request.time))
    # Slurm queues a batch job again when one of its nodes fails; appending keeps the first
    # attempt's output (the error that says which node) in front of the second's
    sbatch.append(("open-mode", "append"))
    return replace(placed, mem=mem, sbatch=tuple(sbatch), why=placed.why + tuple(why))
