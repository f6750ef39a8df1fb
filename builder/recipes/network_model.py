"""The `network` section of a site file (what its jobs communicate over, and whose libfabric
multi-node jobs use) and its reference all-reduce figures, which the smoke suite judges runs
against."""

from dataclasses import dataclass, fields

import hpcml_facts as handed_over

from .section import Section


@dataclass(frozen=True)
class HostLibfabric:
    """The host's libfabric stack, bound on multi-node jobs when network.libfabric is host
    (and then first on LD_LIBRARY_PATH)."""

    binds: tuple
    library_path: tuple

    @classmethod
    def from_yaml(cls, spec: Section):
        return cls(tuple(spec["binds"]), tuple(spec["library_path"]))


@dataclass(frozen=True)
class Network:
    transport: str = ""  # ofi | ib | socket; "" when the file has no network section
    provider: str = ""
    libfabric: str = ""  # image | host: whose libfabric multi-node jobs use ("" when none)
    host_libfabric: HostLibfabric | None = None

    @classmethod
    def from_yaml(cls, spec: Section):
        libfabric, host = spec.get("libfabric", ""), spec.get("host_libfabric")
        if libfabric == "host" and not host:
            raise spec.error((), "libfabric: host needs host_libfabric (its binds and library_path); expected both")
        if host and not libfabric:
            raise spec.error(("host_libfabric",), "host_libfabric without libfabric; expected libfabric: image or host")
        if libfabric and spec.get("transport") != "ofi":
            raise spec.error(
                ("libfabric",), f"libfabric is an ofi setting; expected transport: ofi, found {spec.get('transport')}"
            )
        return cls(
            spec.get("transport", ""),
            spec.get("provider", ""),
            libfabric,
            HostLibfabric.from_yaml(spec.part("host_libfabric")) if host else None,
        )

    @property
    def host_binds(self) -> tuple:
        """What multi-node jobs bind for the host's libfabric: () unless it is chosen."""
        return self.host_libfabric.binds if self.libfabric == "host" else ()

    @property
    def host_library_path(self) -> tuple:
        return self.host_libfabric.library_path if self.libfabric == "host" else ()

    def facts(self) -> handed_over.Network:
        """The keys the file sets, as the smoke suite reads them; with the host's libfabric,
        where its preflight expects the plugin's libfabric."""
        return handed_over.Network(
            self.transport or None, self.provider or None, self.libfabric or None, self.host_library_path
        )


@dataclass(frozen=True)
class Allreduce:
    """A reference all-reduce figure the smoke suite judges a run against."""

    nodes: int
    bytes: int
    busbw_gbs: float
    source: str
    dtype: str | None = None
    tolerance: float | None = None

    def facts(self) -> handed_over.Reference:
        return handed_over.Reference(**{f.name: getattr(self, f.name) for f in fields(self)})
