"""A Python venv built in the build stage and copied whole into the final stage.

Emits: "python", build (python3 packages, the venv, pip's build tools; VIRTUAL_ENV and PATH
for the later blocks) and final (python3, the venv copied from build, %environment, a %test,
the %runscript and %help).
Reads: target.python.venv (python.venv, default /opt/venv); target.python.build_tools
(setuptools, wheel, ninja at their versions.yaml python_packages pins). No site fields.

Example, recipes/targets/lumi-rocm.yaml (`python.venv: /opt/venv`) renders
(containers/lumi-rocm.devel.def):

    echo '--- devel: python'
    export VIRTUAL_ENV=/opt/venv
    export PATH="/opt/venv/bin:${PATH}"
    python3 -m venv /opt/venv
    pip install --no-cache-dir setuptools==80.9.0 wheel==0.45.1 ninja==1.13.0
"""

from ...recipes.target_model import Target
from ...values.shell import cmd, python_check
from ..parts import Part
from ..pip_install import Request, lines

# Both stages use the distribution's python3, so the venv's interpreter link stays valid.
_VENV_CHECK = """
import sys
assert sys.prefix == sys.argv[1], f"venv is {sys.prefix}, expected {sys.argv[1]}"
print("python", sys.version.split()[0], "in", sys.prefix)
"""


def venv_env(venv) -> tuple:
    """The variables that put a venv first: ((VIRTUAL_ENV, venv), (PATH, venv/bin:$PATH))."""
    return (("VIRTUAL_ENV", venv), ("PATH", f"{venv}/bin:${{PATH}}"))


def parts(target: Target):
    venv = target.python.venv
    pins = [f"{name}=={version}" for name, version in target.python.build_tools]
    path = venv_env(venv)
    return [
        Part(
            block="python",
            stage="build",
            packages=("ca-certificates", "g++", "make", "python3", "python3-dev", "python3-venv"),
            build_env=path,
            post=(cmd("python3", "-m", "venv", venv), *lines(target, Request("python", tuple(pins)))),
        ),
        Part(
            block="python",
            stage="final",
            packages=("ca-certificates", "python3"),
            copy_from_build=(venv,),
            env=path,
            test=(python_check("python", _VENV_CHECK, venv),),
            # python's own options (run -c CODE, run -m MODULE) go to python, not to exec
            runscript=('case "${1:-}" in ""|-*) exec python "$@" ;; esac', 'exec "$@"'),
            help=(
                f"Python venv {venv} is on PATH. `run` with no arguments starts python, and",
                "`run -c CODE` or `run -m MODULE ARGS...` passes its options to python;",
                "`run CMD ARGS...` runs CMD inside the image.",
            ),
        ),
    ]
