"""python -m smoke [CHECK] [options]: the command line, and the order the checks run in."""

import argparse
import os
import socket
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import hpcml_contract as contract
import launchenv

from . import allreduce, bandwidth, config, ddp, dscheck, groups, mpicheck, preflight, report, transport
from .session import EXIT_FAILED, Session, fail
from .sizes import SizeError, parse_sweep
from .verdict import ERROR, FAIL, PASS, Verdict

# the suite's own summary (the package's first paragraph), not this module's docstring
_DESCRIPTION = " ".join(sys.modules[__package__].__doc__.split("\n\n")[0].split())
EXIT_BAD_INPUT = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.exit(EXIT_BAD_INPUT, f"smoke: error: {message} (see python -m smoke --help)\n")


def parser():
    p = _Parser(
        prog="python -m smoke",
        description=_DESCRIPTION,
        epilog="Exit status: 0 every check passed or had nothing to judge, 1 a check "
        "failed, 2 bad input, 3 the run timed out.",
    )
    p.add_argument(
        "check",
        nargs="?",
        default="all",
        choices=CHECKS,
        help="what to run (default: all, which starts with the preflight: this node's "
        "driver and GPUs against the image, before any collective)",
    )
    p.add_argument("--sizes", help="all-reduce sizes, MIN:MAX doubling or A,B,C (default 8:256M on GPUs, 8:64M on CPU)")
    p.add_argument(
        "--dtypes", help="comma-separated: float32,bfloat16,float16 (default: all three on GPUs, float32 on CPU)"
    )
    p.add_argument("--warmup", type=_count, default=5, help="untimed all-reduces per size (default 5)")
    p.add_argument("--iters", type=_count, default=20, help="timed all-reduces per size (default 20)")
    p.add_argument("--timeout", type=_seconds, default=300.0, help="the whole run's limit in seconds (default 300)")
    p.add_argument(
        "--op-timeout",
        type=_seconds,
        default=60.0,
        help="limit for each collective and for joining, in seconds (default 60)",
    )
    p.add_argument(
        "--site-facts",
        metavar="FILE",
        help=f"the site's references and network as JSON (default: ${contract.SITE_FACTS}, "
        "which singularity_wrapper sets from the site's settings)",
    )
    p.add_argument(
        "--out",
        default=os.environ.get("SMOKE_OUT", contract.SMOKE_FOLDER),
        help=f"folder for {contract.SMOKE_REPORT}, {contract.SMOKE_PLOT}, transport logs and the DDP "
        f"checkpoint; shared by all nodes (default ./{contract.SMOKE_FOLDER})",
    )
    p.add_argument("--image-facts", help=argparse.SUPPRESS)  # tests: another image.json
    # The DeepSpeed launcher adds --local_rank=N; LOCAL_RANK in the environment says the same.
    p.add_argument("--local_rank", "--local-rank", type=int, help=argparse.SUPPRESS)
    return p


def _count(text):
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more")
    return int(text)


def _seconds(text):
    try:
        value = float(text)
    except ValueError:
        value = -1
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return value


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parser().parse_args(argv)
    try:
        facts = config.image(args.image_facts)
        site = config.site(args.site_facts)
        site_name = site.site
        sizes = parse_sweep(args.sizes) if args.sizes else None
        dtypes = args.dtypes.split(",") if args.dtypes else None
        if dtypes and not set(dtypes) <= set(allreduce.EXACT_LIMIT):
            raise SizeError(f"--dtypes {args.dtypes!r}: expected some of {', '.join(allreduce.EXACT_LIMIT)}")
        out = Path(args.out)
        if args.check != "preflight":  # the preflight writes nothing (it runs in %test)
            out.mkdir(parents=True, exist_ok=True)
    except (config.ConfigError, SizeError, OSError) as error:
        print(f"smoke: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT

    checks = {}
    if args.check in ("all", "preflight"):
        checks = preflight.check(preflight.probe(), facts)
        nodes = os.environ.get("SLURM_JOB_NUM_NODES", "1")
        checks.update(preflight.network(facts, site, int(nodes) if nodes.isdigit() else 1))
        failed = report.overall(checks) == FAIL
        if args.check == "preflight" or failed:
            _say_preflight(checks, failed and args.check == "all")
            return EXIT_FAILED if failed else 0
    session = Session(out, args.op_timeout, args.timeout)
    run = Run(session, facts, site, args, sizes, dtypes)
    try:
        session.join()
        session.say(
            f"smoke: {session.world} rank(s) on {session.nodes} node(s), {session.backend} "
            f"on {session.device}, launched by {session.launch.source}, site {site_name or 'unknown'}"
        )
        for name, check in COLLECTIVE.items():
            if args.check in ("all", name):
                checks.update(check(run))
        session.doing("writing the report")
        if session.rank == 0:
            _report(session, site_name, argv, checks, run.rows)
        session.leave()
    except KeyboardInterrupt:
        os.write(2, f"smoke: rank {session.rank} interrupted while {session.phase}\n".encode())
        return 130
    except Exception as error:  # every failure becomes this rank's diagnosis
        status = fail(session, error)
        if session.rank == 0:
            checks["error"] = Verdict(ERROR, session.diagnosis(str(error)))
            _write_quietly(session, site_name, argv, checks, run.rows)
        return status
    return EXIT_FAILED if report.overall(checks) == FAIL else 0


def _say_preflight(checks, stopped):
    """The verdicts, once per node (a launcher starts one process per GPU)."""
    try:
        launch = launchenv.detect()
    except launchenv.LaunchError:
        launch = None
    if launch and launch.local_rank != 0:
        return
    lines = report.verdict_lines(checks)
    if launch and launch.world_size > launch.local_world_size:
        host = socket.gethostname().split(".")[0]
        lines = "\n".join(f"{host}: {line}" for line in lines.splitlines())
    print(lines, flush=True)
    if stopped:
        print("smoke: the preflight failed, so no collective was started", flush=True)


def _deepspeed(run):
    """ds_report and the op loads on rank 0, the engine on every rank; one verdict each."""
    session, facts, op_timeout = run.session, run.facts, run.args.op_timeout
    session.doing("the DeepSpeed op checks (rank 0)")
    results = {}
    ds = facts.deepspeed
    promised = list(ds.promised_ops)
    # the ops were built for this accelerator; a GPU image on a host without a GPU would
    # otherwise fall back to DeepSpeed's CPU accelerator and see none of them installed
    os.environ.setdefault("DS_ACCELERATOR", ds.accelerator)
    if session.rank == 0:
        results["deepspeed ops"] = dscheck.check_ops(promised, list(ds.listed_ops), timeout=op_timeout * 0.75)
        results["deepspeed op loads"] = dscheck.load_ops(promised)
    session.doing("the DeepSpeed engine under ZeRO 1, 2 and 3")
    if os.environ["DS_ACCELERATOR"] != "cpu" and session.device == "cpu":
        results["deepspeed engine"] = Verdict.none(
            "no GPU here; the engine check runs where the image's GPUs are (python -m smoke on a GPU node)"
        )
    else:
        results["deepspeed engine"] = dscheck.engine(session)
    everyone = session.gather(results)
    merged = dict(everyone[0])
    engines = [r["deepspeed engine"] for r in everyone]
    ranks = f" on all {len(engines)} ranks" if len(engines) > 1 else ""
    merged["deepspeed engine"] = next(
        (e for e in engines if e.verdict != PASS), replace(engines[0], why=engines[0].why + ranks)
    )
    return merged


@dataclass
class Run:
    """What the collective checks read, and the all-reduce table they leave for the report."""

    session: Session
    facts: object  # config.image: the image's promises
    site: object  # config.site: the site's references
    args: argparse.Namespace
    sizes: list | None
    dtypes: list | None
    rows: list = field(default_factory=list)


def _allreduce(run):
    session, dtypes = run.session, run.dtypes or allreduce.default_dtypes(run.session.backend)
    sizes = run.sizes or parse_sweep("8:256M" if session.backend == "nccl" else "8:64M")
    run.rows = rows = allreduce.run(session, sizes, dtypes, run.args.warmup, run.args.iters)
    wrong = sum(row["wrong"] for row in rows)
    checks = {
        "allreduce sum": Verdict.judged(
            not wrong, f"{wrong} wrong values" if wrong else f"exact at all {len(rows)} sizes"
        )
    }
    checks["allreduce busbw"] = bandwidth.judge(
        rows, bandwidth.pick_threshold(run.site.allreduce, session.nodes, dtypes)
    )
    session.doing("reading the transport logs")
    summary = transport.parse(session.transport_lines())
    checks["transport"] = transport.judge(session.gather(summary), run.site.network, session.nodes, session.backend)
    return checks


def _groups(run):
    return {"groups": groups.run(run.session)}


def _mpi(run):
    run.session.doing("the mpi4py all-reduce")
    results = run.session.gather(mpicheck.check(run.session, run.site.slurm_mpi, run.args.op_timeout))
    return {"mpi4py": next((r for r in results if r.verdict == FAIL), results[0])}


def _ddp(run):
    return {"ddp": ddp.run(run.session)}


# the registry of the checks that run on a joined session, in the order `all` runs them
COLLECTIVE = {"allreduce": _allreduce, "groups": _groups, "deepspeed": _deepspeed, "mpi": _mpi, "ddp": _ddp}
CHECKS = ("all", "preflight", *COLLECTIVE)


def _report(session, site_name, argv, checks, rows):
    data = report.document(session, site_name, argv, checks, rows)
    if rows:
        session.say(report.table(rows, session.world))
    session.say(report.verdict_lines(checks))
    path = session.out / contract.SMOKE_REPORT
    report.write_json(path, data)
    written = [str(path)]
    if rows:
        busbw = checks.get("allreduce busbw")
        threshold = busbw.details.get("threshold") if busbw else None
        try:
            report.plot(
                session.out / contract.SMOKE_PLOT,
                rows,
                threshold,
                f"all-reduce, {session.world} ranks on {session.nodes} node(s), "
                f"{session.backend}, site {site_name or 'unknown'}",
            )
            written.append(str(session.out / contract.SMOKE_PLOT))
        except ImportError:
            session.say("smoke: no plot: matplotlib is not installed")
    session.say(f"smoke: {data.verdict.upper()}; report: {', '.join(written)}")


def _write_quietly(session, site_name, argv, checks, rows):
    try:
        report.write_json(session.out / contract.SMOKE_REPORT, report.document(session, site_name, argv, checks, rows))
    except Exception:
        pass
