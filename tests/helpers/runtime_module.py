"""A module of the image's runtime (runtime/: smoke, launchenv) run as the image runs it, in
a child Python with runtime/ on its path and the host's variables that would change the
answer taken out."""

import os
import subprocess
import sys

from conftest import ROOT


def run(module, *args, env=None, dropped=(), python=sys.executable, extra_pythonpath=(), timeout=60):
    """``python -m module args`` with ``env`` on top of this process's environment, less the
    variables ``dropped`` names (a name, or a prefix ending in '_')."""
    clean = {k: v for k, v in os.environ.items() if not any(_drops(d, k) for d in dropped)}
    clean.update(env or {})
    clean["PYTHONPATH"] = os.pathsep.join([str(ROOT / "runtime"), *map(str, extra_pythonpath)])
    return subprocess.run(
        [str(python), "-m", module, *map(str, args)], env=clean, capture_output=True, text=True, timeout=timeout
    )


def _drops(dropped, name):
    return name.startswith(dropped) if dropped.endswith("_") else name == dropped
