"""A Python venv built in the build stage and copied whole into the final stage."""

from ...shell import cmd, python_check
from ..parts import Part

# Both stages use the distribution's python3, so the venv's interpreter link stays valid.
_VENV_CHECK = """
import sys
assert sys.prefix == sys.argv[1], f"venv is {sys.prefix}, expected {sys.argv[1]}"
print("python", sys.version.split()[0], "in", sys.prefix)
"""


def parts(target):
    venv = target.venv
    pins = [f"{name}=={version}" for name, version in target.build_tools]
    path = (("VIRTUAL_ENV", venv), ("PATH", f"{venv}/bin:${{PATH}}"))
    return [
        Part(block="python", stage="build",
             packages=("ca-certificates", "g++", "make", "python3", "python3-dev", "python3-venv"),
             build_env=path,
             post=(cmd("python3", "-m", "venv", venv),
                   cmd("pip", "install", "--no-cache-dir", *pins))),
        Part(block="python", stage="final",
             packages=("ca-certificates", "python3"),
             copy_from_build=(venv,),
             env=path,
             test=(python_check("python", _VENV_CHECK, venv),),
             # python's own options (run -c CODE, run -m MODULE) go to python, not to exec
             runscript=('case "${1:-}" in ""|-*) exec python "$@" ;; esac', 'exec "$@"'),
             help=(f"Python venv {venv} is on PATH. `run` with no arguments starts python, and",
                   "`run -c CODE` or `run -m MODULE ARGS...` passes its options to python;",
                   "`run CMD ARGS...` runs CMD inside the image.")),
    ]

