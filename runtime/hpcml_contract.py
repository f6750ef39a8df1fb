"""What crosses into each image: the `HPCML_*` variables the runtime in the image reads
(launchenv, the smoke suite) and the names of the files it shares with the builder, each
defined once with what it means.

This file ships in every image (the runtime wheel), so a name added here changes every image;
a variable only the builder, the wrapper or the tests read belongs to builder/contract.py,
which imports this file and adds its own. tests/builder/test_contract.py checks that this file
holds exactly the names runtime/ reads, and that the wrapper and docs/variables.md agree with
both registries. Standard library only.
"""

VARIABLES: dict[str, str] = {}  # name -> meaning, in docs/variables.md's order
FILES: dict[str, str] = {}  # file name -> meaning


def _variable(name: str, meaning: str) -> str:
    VARIABLES[name] = meaning
    return name


def _file(name: str, meaning: str) -> str:
    FILES[name] = meaning
    return name


# --- variables the runtime reads ----------------------------------------------------------------
ALLOW_EMULATION = _variable(
    "HPCML_ALLOW_EMULATION",
    "`1`: run an image of another CPU architecture than the node's (emulated by QEMU, many times "
    "slower) instead of refusing",
)
MASTER_PORT_BASE = _variable(
    "HPCML_MASTER_PORT_BASE",
    "the base of `MASTER_PORT`; the wrapper exports it (default 10000) and `launchenv` reads it",
)
SITE_FACTS = _variable(
    "HPCML_SITE_FACTS",
    "the site's all-reduce references, network and Slurm MPI plugin as JSON (`hpcml_facts.SiteFacts`); "
    "the wrapper passes it into the container, where `python -m smoke` reads it",
)
LAUNCHED_BY = _variable("HPCML_LAUNCHED_BY", "which launcher the ranks came from, kept when CMD reads them again")
NETCHECK_SYSFS = _variable("HPCML_NETCHECK_SYSFS", "a stand-in for `/sys`, to fake a CXI device")

# --- files the runtime writes and the builder reads, or the other way round --------------------
SMOKE_FOLDER = _file(
    "smoke-report", "where `python -m smoke` writes unless given `--out` (`hpcml smoke` gives `images/<target>.smoke/`)"
)
SMOKE_REPORT = _file(
    "smoke.json",
    "the smoke suite's report: machine, versions, all-reduce rows, "
    "each check's verdict; `hpcml smoke`, `publish` and `verify` "
    "read its `verdict`",
)
SMOKE_PLOT = _file("smoke-busbw.png", "busbw against message size, with the site's floor, beside the report")
IMAGE_FACTS = _file(
    "share/hpc-ml-runtime/image.json",
    "what the image promises (GPU archs, "
    "DeepSpeed ops, communication stack), under "
    "its venv: the build writes it, the smoke "
    "suite reads it",
)
