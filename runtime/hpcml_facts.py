"""The shapes of what passes between the builder and the runtime: the image's promises
(`image.json`, written into the image at build time), the site's facts (`$HPCML_SITE_FACTS`,
which the wrapper hands over at run time) and, back, the smoke suite's report (`smoke.json`).
Typed, frozen records: the builder makes the first two from the recipe model and reads the
report (builder/facts.py loads this file); the smoke suite reads the first two and writes the
report.

The report's records live in hpcml_report and the reading rule in hpcml_json; this module
carries their names too, so that both sides import every record from here.
`to_json()` gives the JSON object the file or the variable holds; `from_json(data, where)`
reads one back or raises FactsError, one line naming the key. Standard library only.

Example: ImageFacts.from_json(json.loads(text), "image.json").deepspeed.promised_ops
"""

from dataclasses import dataclass, field

from hpcml_json import FactsError, strings, take, without_empty
from hpcml_report import ERROR, FAIL, NONE, NOT_MEASURED, PASS, Machine, SmokeReport, Verdict

# image.json, $HPCML_SITE_FACTS, smoke.json (hpcml_report), and the error every reader raises
__all__ = [
    "CommStack",
    "DeepSpeedPromise",
    "GpuPromise",
    "ImageFacts",
    "Network",
    "Reference",
    "SiteFacts",
    "ERROR",
    "FAIL",
    "NONE",
    "NOT_MEASURED",
    "PASS",
    "Machine",
    "SmokeReport",
    "Verdict",
    "FactsError",
]


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
        runs = take(data, "amdgpu_runs", (dict,), where, default={})
        for release in runs:
            strings(runs, release, f"{where}: amdgpu_runs")
        return cls(
            strings(data, "archs", where),
            dict(take(data, "min_driver", (dict,), where, default={})),
            take(data, "wavefront_size", (int,), where),
            {release: tuple(rocm) for release, rocm in runs.items()},
            dict(take(data, "amdgpu_modules", (dict,), where, default={})),
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
            take(data, "accelerator", (str,), where, default="cpu"),
            strings(data, "listed_ops", where),
            strings(data, "promised_ops", where),
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
            take(data, "library", text, where, default="nccl"),
            *(take(data, key, text, where) for key in ("plugin", "plugin_path", "rccl", "libfabric_dir", "provider")),
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
        gpu, comm = take(data, "gpu", (dict,), where), take(data, "comm", (dict,), where)
        return cls(
            take(data, "target", (str,), where),
            GpuPromise.from_json(gpu, f"{where}: gpu") if gpu is not None else None,
            DeepSpeedPromise.from_json(take(data, "deepspeed", (dict,), where, default={}), f"{where}: deepspeed"),
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
        return without_empty({**vars(self), "host_library_path": list(self.host_library_path)})

    @classmethod
    def from_json(cls, data, where):
        text = (str,)
        return cls(
            *(take(data, key, text, where) for key in ("transport", "provider", "libfabric")),
            strings(data, "host_library_path", where),
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
        return without_empty(dict(vars(self)))

    @classmethod
    def from_json(cls, data, where):
        number = (int, float)
        return cls(
            take(data, "nodes", (int,), where, default=0),
            take(data, "bytes", (int,), where, default=0),
            take(data, "busbw_gbs", number, where, default=0.0),
            take(data, "source", (str,), where, default=""),
            take(data, "dtype", (str,), where),
            take(data, "tolerance", number, where),
        )

    @staticmethod
    def for_run(references, nodes: int, dtypes) -> "Reference | None":
        """The reference a run of ``nodes`` measuring ``dtypes`` is judged against: the one for
        exactly this many nodes, else the largest node count below; among those, one whose
        dtype was measured, of the smallest message. The smoke suite judges by it and the
        ReFrame checks (builder/run/reframe_suite.py) set their reference from it."""
        fitting = [ref for ref in references if ref.nodes <= nodes and (ref.dtype or "float32") in dtypes]
        if not fitting:
            return None
        most = max(ref.nodes for ref in fitting)
        return min((ref for ref in fitting if ref.nodes == most), key=lambda ref: ref.bytes)


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
        references = take(data, "allreduce", (list,), where, default=[])
        return cls(
            site,
            Network.from_json(take(data, "network", (dict,), where, default={}), f"{where}: network"),
            tuple(Reference.from_json(item, f"{where}: allreduce[{i}]") for i, item in enumerate(references)),
            take(data, "slurm_mpi", (str,), where),
        )
