"""The contract between builder, wrapper and runtime: every `HPCML_*` variable and shared file
name, as the runtime package defines them (runtime/hpcml_contract.py).

The runtime ships alone inside each image and cannot import the builder, so the definitions
live there, and the builder loads that very file from where it keeps the runtime's source: a
checkout's runtime/, or builder/_data/runtime/ in an installed copy (resources.py). Use it as
a module: `from .. import contract` then `contract.SITE_FACTS`, or
`from ..contract import SMOKE_REPORT`.

Names that are the builder's own: FAILURE_MARKER, shared by the lines it renders and the build
that runs them, and BUILDER_VARIABLES, the `HPCML_*` variables only the builder reads.
"""

import importlib.util

from . import resources

_SOURCE = resources.runtime_source() / "hpcml_contract.py"


def _load():
    spec = importlib.util.spec_from_file_location("hpcml_contract", _SOURCE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_CONTRACT = _load()

# A %post or %test line that starts with this is the reason a layer build failed, for users:
# the build reports that line alone instead of the log's last lines (layerbuild/layers.py).
# echo "hpcml-error: the frameworks need other versions of ..." >&2; exit 1
FAILURE_MARKER = "hpcml-error: "

# Variables only the builder reads, name -> meaning (docs/design.md lists them). Kept out of
# the runtime's registry: that file is in every image, and a name added there changes them all.
BUILDER_VARIABLES: dict[str, str] = {}
RECIPES = "HPCML_RECIPES"
BUILDER_VARIABLES[RECIPES] = (
    "the recipe tree commands read when not given `--recipes` (default: `./recipes` where it holds "
    "`versions.yaml`, else the recipes installed with the builder)"
)


def __getattr__(name):
    """The runtime module's names, read through this one (PEP 562)."""
    return getattr(_CONTRACT, name)


def __dir__():
    return sorted(set(globals()) | set(dir(_CONTRACT)))
