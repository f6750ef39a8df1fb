"""The one place where values become shell text.

Blocks build commands with `cmd()` (every argument quoted) and the renderer writes
environment values with `env_value()`. A value that contains `${NAME` is meant to be
expanded when the container starts (`/opt/venv/bin:${PATH}`, `/tmp/${USER}-miopen`): it is
double-quoted with every other special character escaped. Anything else is taken literally.
"""

import re
import shlex

_EXPANDS = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*")


def quote(value) -> str:
    return shlex.quote(str(value))


def cmd(*argv) -> str:
    return " ".join(quote(arg) for arg in argv)


def register_libraries(conf: str, *folders: str) -> tuple:
    """Lines that add ``folders`` to the loader's cache through the file ``conf``
    (/etc/ld.so.conf.d/...), so that programs find the libraries without LD_LIBRARY_PATH."""
    return (f"printf '%s\\n' {' '.join(folders)} > {conf}", "ldconfig")


def env_value(value) -> str:
    text = str(value)
    if not _EXPANDS.search(text):
        return quote(text)
    escaped = re.sub(r'(["\\`])', r"\\\1", text)
    escaped = re.sub(r"\$(?!\{)", r"\\$", escaped)
    return f'"{escaped}"'


# A path that starts with a variable: $SINGULARITY_ALLOWED_DIR/a100.sif, ${WORK}/x.sif
_LEADING_VARIABLE = re.compile(r"^\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))(/.*)?$")


def leading_variable(path: str) -> str:
    """The variable a path starts with ("" for none)."""
    match = _LEADING_VARIABLE.match(str(path))
    return (match.group(1) or match.group(2)) if match else ""


def path_value(path) -> str:
    """A path for a job script: a leading variable is expanded when the script runs, the
    rest is taken literally ("${SINGULARITY_ALLOWED_DIR}"/'my image.sif')."""
    match = _LEADING_VARIABLE.match(str(path))
    if not match:
        return quote(path)
    rest = match.group(3) or ""
    return f'"${{{match.group(1) or match.group(2)}}}"' + (quote(rest) if rest else "")


def export(name: str, value) -> str:
    return f"export {name}={env_value(value)}"


def python_check(python: str, code: str, *args) -> str:
    """A command that runs a small Python check with arguments passed as argv."""
    return cmd(python, "-c", code.strip() + "\n", *args)
