"""The runtime package (launchenv and the smoke suite) as a wheel that every image installs.

The same sources always give the same bytes: hatchling writes files in sorted order with a
fixed timestamp (pinned here, so a SOURCE_DATE_EPOCH in the caller's environment cannot move
it). The wheel's sha256 goes into each definition, so a change to the runtime code changes the
top layer's key and nothing below it.
"""

import hashlib
import os
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .. import resources
from ..errors import SetupError, ToolError
from ..fileio import write_bytes_atomic
from ..interpreter import lacking

# 2020-02-02, hatchling's own reproducible default, kept even when SOURCE_DATE_EPOCH is set
FIXED_EPOCH = "1580601600"
BUILD_ARG = "RUNTIME_WHEEL"  # the definition's %files takes the wheel's path from it


@dataclass(frozen=True)
class Wheel:
    name: str  # hpc_ml_runtime-<version>-py3-none-any.whl
    sha256: str
    data: bytes = b""

    def write(self, folder: Path) -> bool:
        """Write the wheel into ``folder`` (atomically); False when it was there already."""
        return write_bytes_atomic(Path(folder) / self.name, self.data)


def current() -> Wheel:
    """The wheel of the runtime sources as they are now (built once per content)."""
    files = resources.runtime_files()
    return _build(tuple(files.items()), _fingerprint(files))


def _fingerprint(files: dict) -> str:
    digest = hashlib.sha256()
    for name, path in sorted(files.items()):
        digest.update(name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


@lru_cache(maxsize=4)
def _build(files: tuple, fingerprint: str) -> Wheel:
    try:
        from hatchling.builders.wheel import WheelBuilder
    except ModuleNotFoundError:
        raise SetupError(lacking(["hatchling"], "it builds the runtime wheel")) from None
    with tempfile.TemporaryDirectory(prefix="hpcml-wheel-") as work, _pinned_epoch():
        source = Path(work) / "runtime"  # the project, gathered: its files live in two places when installed
        for name, path in files:
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, source / name)
        try:
            built = list(WheelBuilder(str(source)).build(directory=work, versions=["standard"]))
        except Exception as error:  # hatchling reports bad metadata in many ways
            raise ToolError(f"{resources.runtime_source()}: could not build the runtime wheel: {error}") from None
        path = Path(built[0])
        data = path.read_bytes()
    return Wheel(path.name, hashlib.sha256(data).hexdigest(), data)


@contextmanager
def _pinned_epoch():
    saved = os.environ.get("SOURCE_DATE_EPOCH")
    os.environ["SOURCE_DATE_EPOCH"] = FIXED_EPOCH
    try:
        yield
    finally:
        if saved is None:
            del os.environ["SOURCE_DATE_EPOCH"]
        else:
            os.environ["SOURCE_DATE_EPOCH"] = saved
