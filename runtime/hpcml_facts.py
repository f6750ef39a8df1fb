"""The shapes of what passes between the builder and the runtime: the image's promises
(`image.json`, written into the image at build time), the site's facts (`$HPCML_SITE_FACTS`,
which the wrapper hands over at run time) and, back, the smoke suite's report (`smoke.json`).
Typed, frozen records: the builder makes the first two from the recipe model and reads the
report (builder/facts.py loads this file); the smoke suite reads the first two and writes the
report.

`to_json()` gives the JSON object the file or the variable holds; `from_json(data, where)`
reads one back or raises FactsError, one line naming the key. Standard library only.

Example: ImageFacts.from_json(json.loads(text), "image.json").deepspeed.promised_ops
"""

from dataclasses import dataclass, field


class FactsError(ValueError):
    pass


def _take(data, key, kinds, where, default=None):
    """data[key] when it is one of ``kinds`` (None allowed where default is None and absent)."""
    if not isinstance(data, dict):
        raise FactsError(f"{where}: expected a JSON object")
    value = data.get(key, default)
    if value is default or isinstance(value, kinds):
        return value
    raise FactsError(f"{where}: {key}: expected {' or '.join(kind.__name__ for kind in kinds)}, not {value!r}")


def _strings(data, key, where) -> tuple:
    values = _take(data, key, (list,), where, default=[])
    if not all(isinstance(value, str) for value in values):
        raise FactsError(f"{where}: {key}: expected a list of strings")
    return tuple(values)


def _without_empty(data: dict) -> dict:
    return {key: value for key, value in data.items() if value not in (None, (), [], {})}


# --- image.json ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuPromise:
    archs: tuple  # sm_90, gfx90a, ...: torch and the ops carry code for each
    min_driver: dict = field(default_factory=dict)  # CUDA major -> oldest driver it runs on
    wavefront_size: int | None = None  # ROCm
    # ROCm: AMD's matrix, amdgpu release -> the ROCm releases it runs ({"6.3": ["6.1", ..., "7.0"]}),
    # and the amdgpu module's own version -> its release ({"6.10.5": "6.3"})
    amdgpu_runs: dict = field(default_factory=dict)
    amdgpu_modules: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        data = {"archs": list(self.archs)}
        if self.min_driver:
            data["min_driver"] = dict(self.min_driver)
        if self.wavefront_size:
            data["wavefront_size"] = self.wavefront_size
        if self.amdgpu_runs:
            data["amdgpu_runs"] = {release: list(rocm) for release, rocm in self.amdgpu_runs.items()}
            data["amdgpu_modules"] = dict(self.amdgpu_modules)
        return data

    @classmethod
    def from_json(cls, data, where):
        runs = _take(data, "amdgpu_runs", (dict,), where, default={})
        for release in runs:
            _strings(runs, release, f"{where}: amdgpu_runs")
        return cls(
            _strings(data, "archs", where),
            dict(_take(data, "min_driver", (dict,), where, default={})),
            _take(data, "wavefront_size", (int,), where),
            {release: tuple(rocm) for release, rocm in runs.items()},
            dict(_take(data, "amdgpu_modules", (dict,), where, default={})),
        )


@dataclass(frozen=True)
class DeepSpeedPromise:
    accelerator: str = "cpu"  # DS_ACCELERATOR the ops were built for
    listed_ops: tuple = ()  # every op ds_report lists
    promised_ops: tuple = ()  # those precompiled into the image

    def to_json(self) -> dict:
        return {
            "accelerator": self.accelerator,
            "listed_ops": list(self.listed_ops),
            "promised_ops": list(self.promised_ops),
        }

    @classmethod
    def from_json(cls, data, where):
        return cls(
            _take(data, "accelerator", (str,), where, default="cpu"),
            _strings(data, "listed_ops", where),
            _strings(data, "promised_ops", where),
        )


@dataclass(frozen=True)
class CommStack:
    library: str  # nccl or rccl
    plugin: str | None = None  # the network plugin's project
    # with RCCL and a plugin: where preflight finds it, the RCCL and libfabric it goes with
    plugin_path: str | None = None
    rccl: str | None = None
    libfabric_dir: str | None = None
    provider: str | None = None  # the libfabric provider it must find (cxi)

    def to_json(self) -> dict:
        data = {"library": self.library, "plugin": self.plugin}
        if self.plugin_path:
            data.update(
                plugin_path=self.plugin_path, rccl=self.rccl, libfabric_dir=self.libfabric_dir, provider=self.provider
            )
        return data

    @classmethod
    def from_json(cls, data, where):
        text = (str,)
        return cls(
            _take(data, "library", text, where, default="nccl"),
            *(_take(data, key, text, where) for key in ("plugin", "plugin_path", "rccl", "libfabric_dir", "provider")),
        )


@dataclass(frozen=True)
class ImageFacts:
    """What an image promises; target None: not inside an image, nothing promised."""

    target: str | None
    gpu: GpuPromise | None = None  # None: a CPU image
    deepspeed: DeepSpeedPromise = DeepSpeedPromise()
    comm: CommStack | None = None

    def to_json(self) -> dict:
        return {
            "target": self.target,
            "gpu": self.gpu.to_json() if self.gpu else None,
            "deepspeed": self.deepspeed.to_json(),
            "comm": self.comm.to_json() if self.comm else None,
        }

    @classmethod
    def from_json(cls, data, where):
        gpu, comm = _take(data, "gpu", (dict,), where), _take(data, "comm", (dict,), where)
        return cls(
            _take(data, "target", (str,), where),
            GpuPromise.from_json(gpu, f"{where}: gpu") if gpu is not None else None,
            DeepSpeedPromise.from_json(_take(data, "deepspeed", (dict,), where, default={}), f"{where}: deepspeed"),
            CommStack.from_json(comm, f"{where}: comm") if comm is not None else None,
        )


# --- $HPCML_SITE_FACTS ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Network:
    transport: str | None = None  # what NCCL/RCCL must use between nodes (IB, AWS Libfabric, ...)
    provider: str | None = None  # the libfabric provider (cxi)
    libfabric: str | None = None  # "host" or "image": whose libfabric multi-node jobs use
    host_library_path: tuple = ()  # the host's libfabric, bound in

    def to_json(self) -> dict:
        return _without_empty({**vars(self), "host_library_path": list(self.host_library_path)})

    @classmethod
    def from_json(cls, data, where):
        text = (str,)
        return cls(
            *(_take(data, key, text, where) for key in ("transport", "provider", "libfabric")),
            _strings(data, "host_library_path", where),
        )


@dataclass(frozen=True)
class Reference:
    """A reference all-reduce figure the smoke suite judges a run against."""

    nodes: int
    bytes: int
    busbw_gbs: float
    source: str
    dtype: str | None = None  # float32 when not said
    tolerance: float | None = None  # 0.05 when not said

    def to_json(self) -> dict:
        return _without_empty(dict(vars(self)))

    @classmethod
    def from_json(cls, data, where):
        number = (int, float)
        return cls(
            _take(data, "nodes", (int,), where, default=0),
            _take(data, "bytes", (int,), where, default=0),
            _take(data, "busbw_gbs", number, where, default=0.0),
            _take(data, "source", (str,), where, default=""),
            _take(data, "dtype", (str,), where),
            _take(data, "tolerance", number, where),
        )


@dataclass(frozen=True)
class SiteFacts:
    """What a run on a site is judged against; site None: nobody said which site."""

    site: str | None
    network: Network = Network()
    allreduce: tuple = ()  # Reference, ...
    slurm_mpi: str | None = None  # srun's --mpi plugin (pmix, pmi2) or none

    def to_json(self) -> dict:
        return {
            "site": self.site,
            "network": self.network.to_json(),
            "allreduce": [reference.to_json() for reference in self.allreduce],
            "slurm_mpi": self.slurm_mpi,
        }

    @classmethod
    def from_json(cls, data, where):
        if not isinstance(data, dict) or not isinstance(data.get("site"), str):
            raise FactsError(f'{where}: expected a JSON object with the site\'s name under "site"')
        site = data["site"]
        references = _take(data, "allreduce", (list,), where, default=[])
        return cls(
            site,
            Network.from_json(_take(data, "network", (dict,), where, default={}), f"{where}: network"),
            tuple(Reference.from_json(item, f"{where}: allreduce[{i}]") for i, item in enumerate(references)),
            _take(data, "slurm_mpi", (str,), where),
        )


# --- smoke.json ----------------------------------------------------------------------------------

PASS = "pass"
FAIL = "fail"
NONE = "none"  # nothing to judge here (no GPU, no reference, no MPI launcher)
NOT_MEASURED = "not measured"  # the run did not measure what the reference is for
ERROR = "error"  # the run stopped on an error before its checks were done


@dataclass(frozen=True)
class Verdict:
    """A check's verdict: one word, one line saying why, and what the check measured;
    smoke.json keeps each as {"verdict": ..., "why": ..., more fields}."""

    verdict: str  # one of the five above
    why: str
    details: dict = field(default_factory=dict)  # more fields for smoke.json: nets, threshold, ...

    @classmethod
    def passed(cls, why, **details):
        return cls(PASS, why, details)

    @classmethod
    def failed(cls, why, **details):
        return cls(FAIL, why, details)

    @classmethod
    def judged(cls, ok, why, **details):
        """Passed when ``ok``, else failed."""
        return cls(PASS if ok else FAIL, why, details)

    @classmethod
    def none(cls, why, **details):
        return cls(NONE, why, details)

    def to_json(self) -> dict:
        return {"verdict": self.verdict, "why": self.why, **self.details}

    @classmethod
    def from_json(cls, data, where):
        verdict, why = _take(data, "verdict", (str,), where), _take(data, "why", (str,), where, default="")
        if verdict is None:
            raise FactsError(f"{where}: verdict: missing")
        return cls(verdict, why, {k: v for k, v in data.items() if k not in ("verdict", "why")})


@dataclass(frozen=True)
class Machine:
    """Where a smoke run ran."""

    hosts: tuple
    nodes: int
    ranks: int
    ranks_per_node: int
    launcher: str | None  # slurm, torchrun, mpirun, ... (None: one process by hand)
    backend: str | None  # nccl or gloo (None: stopped before joining)
    device: str
    cpus: int | None
    kernel: str
    site: str | None

    def to_json(self) -> dict:
        return {**vars(self), "hosts": list(self.hosts)}

    @classmethod
    def from_json(cls, data, where):
        text, number = (str,), (int,)
        return cls(
            _strings(data, "hosts", where),
            *(_take(data, key, number, where, default=0) for key in ("nodes", "ranks", "ranks_per_node")),
            _take(data, "launcher", text, where),
            _take(data, "backend", text, where),
            _take(data, "device", text, where, default=""),
            _take(data, "cpus", number, where),
            _take(data, "kernel", text, where, default=""),
            _take(data, "site", text, where),
        )


@dataclass(frozen=True)
class SmokeReport:
    """A smoke run's report: where it ran, what the image is, the all-reduce rows, each check's
    verdict and the run's."""

    created: str
    command: tuple  # the smoke suite's arguments
    machine: Machine
    image: dict  # the image's provenance labels, short names
    versions: dict  # python, torch, deepspeed, ...: None where absent
    allreduce: tuple  # rows: bytes, count, dtype, time_us, algbw_gbs, busbw_gbs, wrong
    checks: dict  # name -> Verdict, in the order they ran
    verdict: str  # pass, fail or none
    schema: int = 1

    def to_json(self) -> dict:
        return {
            "schema": self.schema,
            "created": self.created,
            "command": list(self.command),
            "machine": self.machine.to_json(),
            "image": dict(self.image),
            "versions": dict(self.versions),
            "allreduce": list(self.allreduce),
            "checks": {name: result.to_json() for name, result in self.checks.items()},
            "verdict": self.verdict,
        }

    @classmethod
    def from_json(cls, data, where):
        checks = _take(data, "checks", (dict,), where, default={})
        verdict = _take(data, "verdict", (str,), where)
        if verdict is None:
            raise FactsError(f"{where}: verdict: missing")
        return cls(
            _take(data, "created", (str,), where, default=""),
            _strings(data, "command", where),
            Machine.from_json(_take(data, "machine", (dict,), where, default={}), f"{where}: machine"),
            dict(_take(data, "image", (dict,), where, default={})),
            dict(_take(data, "versions", (dict,), where, default={})),
            tuple(_take(data, "allreduce", (list,), where, default=[])),
            {name: Verdict.from_json(check, f"{where}: checks: {name}") for name, check in checks.items()},
            verdict,
            _take(data, "schema", (int,), where, default=1),
        )

    def named(self, verdict) -> dict:
        """{check name: why} of the checks with this verdict."""
        return {name: result.why for name, result in self.checks.items() if result.verdict == verdict}
