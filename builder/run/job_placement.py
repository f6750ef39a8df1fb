"""Where a job goes on its site: its size, partition, QoS, account and resources, each in the
site's own form; one clear error for a request the site cannot serve. `p` is the
jobscript.Plan being made."""

import re

from ..errors import RecipeError
from ..errors import shown as escaped
from ..safe_text import SLURM_NAME, SLURM_NAME_EXPECTED, field, single_line
from ..suggest import did_you_mean


def command_line_error(message):
    return RecipeError(message, file="command line")


def size(p):
    site, request = p.site, p.request
    if site.gpu.per_node:
        if request.tasks_per_node:
            raise command_line_error(
                f"--tasks-per-node: on {site.name} ranks follow the GPUs (one per GPU); use --gpus"
            )
        p.gpus = request.gpus or site.gpu.per_node
        if not 1 <= p.gpus <= site.gpu.per_node:
            raise command_line_error(f"--gpus {request.gpus}: {site.name} has {site.gpu.per_node} GPUs per node")
        p.ranks_per_node = p.gpus
        cores = site.cpu.cores_per_gpu or site.cpu.cores_per_node // site.gpu.per_node
        p.cores_per_rank = cores
        p.why.append(
            f"{p.gpus} GPU(s) per node, one rank each, {cores} cores per rank "
            f"({'cpu.cores_per_gpu' if site.cpu.cores_per_gpu else 'the node shared out'})"
        )
    else:
        if request.gpus:
            raise command_line_error(f"--gpus {request.gpus}: site {site.name} has no GPUs")
        p.ranks_per_node = request.tasks_per_node or 1
        if p.ranks_per_node > site.cpu.cores_per_node:
            raise command_line_error(
                f"--tasks-per-node {p.ranks_per_node}: {site.name} has {site.cpu.cores_per_node} cores per node"
            )
        p.cores_per_rank = site.cpu.cores_per_node // p.ranks_per_node
        p.why.append(f"{p.ranks_per_node} rank(s) per node on CPU, {p.cores_per_rank} cores each")
    whole = p.gpus == site.gpu.per_node if site.gpu.per_node else True
    if p.launch == "torchrun" and request.nodes > 1 and not whole:
        raise command_line_error(
            f"--gpus {p.gpus} on {request.nodes} nodes with torchrun: a multi-node "
            f"torchrun job takes whole nodes ({site.gpu.per_node} GPUs); use --launch srun "
            f"for part of each node"
        )
    single_task = p.launch == "torchrun" or (p.launch == "deepspeed" and request.nodes == 1)
    p.tasks_per_node = 1 if single_task else p.ranks_per_node


# Every form of sbatch(1)'s --time: minutes, minutes:seconds, hours:minutes:seconds, days-hours,
# days-hours:minutes, days-hours:minutes:seconds (builder/recipes/schemas/site.yaml: the same).
SLURM_TIME = re.compile(r"(?:([0-9]+)-)?([0-9]+)(?::([0-9]+))?(?::([0-9]+))?")
TIME_FORMS = (
    "minutes, minutes:seconds, hours:minutes:seconds, days-hours, days-hours:minutes or days-hours:minutes:seconds"
)


def seconds(slurm_time, what="--time"):
    """A Slurm time in seconds. No limit (0, UNLIMITED, INFINITE) is refused: it exceeds every
    partition's limit, so Slurm would leave the job pending or refuse it, and we could choose
    no partition for it."""
    match = SLURM_TIME.fullmatch(slurm_time)
    if slurm_time.upper() in ("UNLIMITED", "INFINITE") or (match and not re.search("[1-9]", slurm_time)):
        raise command_line_error(f"{what} {slurm_time}: no time limit; a job needs one, such as 30 or 2:00:00")
    if not match:
        raise command_line_error(
            f"{what} {slurm_time!r}: expected a Slurm time ({TIME_FORMS}), such as 30, 2:00:00 or 1-12"
        )
    days, first, second, third = match.groups()
    if days is None:  # minutes[:seconds], or hours:minutes:seconds
        hours, minutes, secs = (first, second, third) if third is not None else (0, first, second or 0)
    else:  # days-hours[:minutes[:seconds]]
        hours, minutes, secs = first, second or 0, third or 0
    return ((int(days or 0) * 24 + int(hours)) * 60 + int(minutes)) * 60 + int(secs)


def shown(slurm_time) -> str:
    """A time for messages, with its clock form where it is not one already: 90 (1:30:00)."""
    if slurm_time.count(":") == 2:
        return slurm_time
    days, rest = divmod(seconds(slurm_time), 86400)
    clock = f"{rest // 3600}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{slurm_time} ({f'{days}-' if days else ''}{clock})"


def _fits(p, partition):
    """None when the job fits ``partition``, else why not."""
    nodes, site = p.request.nodes, p.site
    if nodes > partition.max_nodes:
        return f"{nodes} nodes > {partition.max_nodes}"
    if nodes < partition.min_nodes:
        return f"{nodes} nodes < {partition.min_nodes}"
    if seconds(p.request.time) > seconds(partition.max_time, "max_time"):
        return f"--time {shown(p.request.time)} > {shown(partition.max_time)}"
    if site.gpu.per_node and p.gpus > partition.max_gpus:
        return f"{p.gpus} GPUs per node > {partition.max_gpus}"
    job_gpus = nodes * p.gpus
    if site.gpu.per_node and partition.max_job_gpus and job_gpus > partition.max_job_gpus:
        return f"{job_gpus} GPUs per job > {partition.max_job_gpus}"
    if site.gpu.per_node and job_gpus < partition.min_job_gpus:
        return f"{job_gpus} GPUs per job < {partition.min_job_gpus}"
    if partition.whole_nodes and site.gpu.per_node and p.gpus < site.gpu.per_node:
        return "whole nodes only"
    return None


def _first_fit(p):
    """(the first of the site's partitions given without being named that fits the job, or
    None; why each one before it did not)."""
    refused = []
    for part in p.site.slurm.partitions:
        if not part.automatic:
            continue
        why_not = _fits(p, part)
        if why_not is None:
            return part, refused
        refused.append(f"{part.name}: {why_not}")
    return None, refused


def _named_partition(p, partitions):
    """The partition the user named, when it takes this job; else one line, which names a
    partition that would take it where one does."""
    site, asked = p.site, p.request.partition
    chosen = partitions.get(asked)
    if chosen is None:
        known = ", ".join(partitions) or "none (the cluster's default is used)"
        raise command_line_error(
            f"--partition {escaped(asked)}: not a partition of {site.name}; expected one of: {known}"
        )
    why_not = _fits(p, chosen)
    if why_not:
        other, _ = _first_fit(p)
        instead = f"; {other.name} takes it" if other else ""
        raise command_line_error(f"--partition {chosen.name} does not fit this job ({why_not}){instead}")
    return chosen


def choose_partition(p):
    site, request = p.site, p.request
    seconds(request.time)
    partitions = {part.name: part for part in site.slurm.partitions}
    if request.partition:
        p.partition = _named_partition(p, partitions)
        p.why.append(f"partition {_noted(p.partition)}: as asked")
        return
    if not partitions:
        p.why.append("partition: the cluster's default (the site file names none)")
        return
    part, refused = _first_fit(p)
    if part is None:
        raise command_line_error(
            f"no partition of {site.name} fits {request.nodes} node(s) x {p.gpus or p.ranks_per_node} "
            f"{'GPUs' if p.gpus else 'ranks'} for {shown(request.time)} ({'; '.join(refused)})"
        )
    p.partition = part
    skipped = f"; skipped {', '.join(refused)}" if refused else ""
    p.why.append(f"partition {_noted(part)}: the first of the site's that fits{skipped}")


def _noted(part) -> str:
    """A partition's name for the script's comments, with its note where it has one."""
    return f"{part.name} ({part.note})" if part.note else part.name


def _qos_misfit(p, qos):
    """None when the job fits ``qos``'s limits, else why not."""
    gpus = p.request.nodes * p.gpus
    if qos.max_time and seconds(p.request.time) > seconds(qos.max_time, "max_time"):
        return f"--time {shown(p.request.time)} > {shown(qos.max_time)}"
    if qos.max_gpus and gpus > qos.max_gpus:
        return f"{gpus} GPUs > {qos.max_gpus}"
    return None


def _choose_qos(p) -> str:
    """The QoS asked for, or the first of the site's (test ones only when named) that fits."""
    site, asked = p.site, p.request.qos
    if asked:
        known = {qos.name: qos for qos in site.slurm.qos}
        if asked not in known:
            raise command_line_error(
                f"--qos {escaped(asked)}: not a QoS of {site.name}; expected one of: "
                f"{', '.join(known) or 'none (the site file names none)'}" + did_you_mean(asked, known)
            )
        why_not = _qos_misfit(p, known[asked])
        if why_not:
            raise command_line_error(f"--qos {asked} does not fit this job ({why_not})")
        p.why.append(f"QoS {asked}: as asked")
        return asked
    if not site.slurm.qos:
        return ""
    refused = []
    for qos in site.slurm.qos:
        if qos.test:
            continue
        why_not = _qos_misfit(p, qos)
        if why_not is None:
            if len(site.slurm.qos) > 1:
                skipped = f"; skipped {', '.join(refused)}" if refused else ""
                p.why.append(f"QoS {qos.name}: the first of the site's that fits{skipped}")
            return qos.name
        refused.append(f"{qos.name}: {why_not}")
    raise command_line_error(
        f"no QoS of {site.name} fits {p.request.nodes * p.gpus} GPUs for {shown(p.request.time)} ({'; '.join(refused)})"
    )


def _account(p) -> str:
    """The project to bill, checked against the site's form; one line when a site that
    requires one gets none."""
    site, asked = p.site, p.request.account
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


def resources(p):
    site, request = p.site, p.request
    sbatch = [("job-name", p.target.name)]
    account = _account(p)
    if account:
        sbatch.append(("account", account))
    if p.partition:
        sbatch.append(("partition", p.partition.name))
    sbatch += [
        ("nodes", str(request.nodes)),
        ("ntasks-per-node", str(p.tasks_per_node)),
        ("cpus-per-task", str(p.cpus_per_task)),
    ]
    if p.gpus:
        if site.slurm.gpu_request == "gpus-per-node":
            sbatch.append(("gpus-per-node", str(p.gpus)))
        else:
            kind = f"{site.slurm.gres_type}:" if site.slurm.gres_type else ""
            sbatch.append(("gres", f"gpu:{kind}{p.gpus}"))
        p.why.append(f"GPUs asked as --{sbatch[-1][0]} (slurm.gpu_request: {site.slurm.gpu_request})")
    if site.slurm.mem == "per_gpu" and p.gpus and site.cpu.mem_per_gpu_gb:
        p.mem = f"{site.cpu.mem_per_gpu_gb * p.gpus}G"
        p.why.append(f"memory {p.mem}: {site.cpu.mem_per_gpu_gb} GB per GPU (slurm.mem: per_gpu)")
    elif site.slurm.mem == "whole_node" and (not site.gpu.per_node or p.gpus == site.gpu.per_node):
        p.mem = "0"
        p.why.append("memory: all of each node, --mem=0 (slurm.mem: whole_node)")
    if p.mem:
        sbatch.append(("mem", p.mem))
    qos = _choose_qos(p)
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
    p.sbatch = sbatch
