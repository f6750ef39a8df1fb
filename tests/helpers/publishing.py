"""Helpers for the publish tests: publish with the CLI, then load the module with Debian's
Lmod or with Environment Modules' modulecmd.tcl."""

import os
import subprocess
from pathlib import Path

from conftest import LMOD_INIT, run_builder

LMOD_DIR = Path("/usr/share/lmod/lmod/libexec")


def publish(image, prefix, *args, env):
    Path(prefix).mkdir(parents=True, exist_ok=True)  # the admin's folder: publish makes none
    return run_builder("publish", "cpu", "--images", image.parent, "--prefix", prefix, *args, env=env, timeout=300)


def lmod(script, prefix, apptainer, **env):
    """Run bash lines after `module use PREFIX/modulefiles`, with Debian's Lmod."""
    assert LMOD_INIT.is_file(), "Lmod is missing: make setup installs Debian's lmod"
    full = dict(os.environ, HPCML_APPTAINER=apptainer, **env)
    full.pop("LOADEDMODULES", None)
    full.pop("_LMFILES_", None)
    text = f"source {LMOD_INIT}\nmodule use {prefix / 'modulefiles'}\n{script}"
    return subprocess.run(["bash", "-c", text], env=full, capture_output=True, text=True, timeout=300)


def tcl_module(modulecmd, published, apptainer, lines):
    script = "".join(
        f'eval "$(tclsh {modulecmd} bash {line})"\n' if not line.startswith("!") else line[1:] + "\n" for line in lines
    )
    env = dict(os.environ, MODULEPATH=str(published / "modulefiles"), HPCML_APPTAINER=apptainer)
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=300)
