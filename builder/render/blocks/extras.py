"""The target's extra Python packages, pinned in versions.yaml; a top-layer block, so adding
one rebuilds neither the OS nor torch."""

from ...shell import cmd
from ..parts import Part


def parts(target):
    if not target.python_packages:
        return []
    pins = [f"{name}=={version}" for name, version in target.python_packages]
    return [Part(block="extras", stage="build", post=(cmd("pip", "install", "--no-cache-dir", *pins),))]
