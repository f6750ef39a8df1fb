"""Before a build installs torch: is there a source for the build the recipe asks for?

A CPU or ROCm torch comes from the PyTorch wheel index the recipe names (PyPI's torch is the
CUDA build). When that index does not answer, the build leaves it out (host_settings) and pip
would take PyPI's torch instead: a wrong image, found late, after pulling the base. So the
build stops first, in one line, unless another source holds that very wheel: a local wheel
folder (pip's find-links, such as `torch-2.13.0+cpu-...whl`) or one of the host's own pip
indexes (a mirror) that lists it.
"""

from pathlib import Path

from ..errors import ToolError
from ..host import hostinfo
from . import pip_indexes


def check(torch, down):
    """Raise ToolError when ``torch`` (a target's Torch) needs an index in ``down`` that no
    other source stands in for; ``down``: the pip indexes that do not answer. Silent when one
    does: the layer build says which index it leaves out."""
    if not torch.index or torch.index not in down:
        return
    wheel = f"torch-{torch.version}+{local_tag(torch.index)}"
    pip = hostinfo.pip_settings()
    for folder in pip["find_links"]:
        if any(Path(folder).glob(f"{wheel}-*.whl")):
            return
    for url in [pip["index_url"], *pip["extra_index_urls"]]:
        if url and url not in down and pip_indexes.lists(url, "torch", f"{wheel}-", pip["cert"]):
            return
    raise ToolError(
        f"{torch.index} does not answer ({pip_indexes.why_down(torch.index, pip['cert'])}), and no wheel "
        f"folder or pip index of this host holds {wheel}; pip would install another torch. Put the "
        f"wheel in a folder pip's find-links names, or add a mirror of that index to pip's "
        f"extra-index-url, then build again"
    )


def local_tag(index: str) -> str:
    """The version's local tag the index's wheels carry: .../whl/rocm6.4 -> rocm6.4."""
    return index.rstrip("/").rsplit("/", 1)[-1]
