"""`python -m smoke.contents`: what this image holds, as one line of JSON: its OS release, its
installed Debian packages, the Python distributions this interpreter sees and DeepSpeed's
compiled op libraries. The one probe of an image's contents: the builder's SBOM runs it in
the image (`apptainer exec IMAGE /opt/venv/bin/python -I -m smoke.contents`) and preflight
finds the ops it reads the GPU code of with `op_libraries`.

Standard library only, and nothing is imported from DeepSpeed or torch: it runs in any image.

    {"os": {"ID": "debian", "VERSION_ID": "12", ...},
     "debs": [["bash", "5.2.15-2+b7", "amd64"], ...],      # installed ones (dpkg's "ii")
     "dists": [["torch", "2.13.0+cpu"], ...],              # as `pip list` shows them
     "ops": ["cpu_adam_op", "fused_adam_op", "ragged_ops", ...]}
"""

import importlib.metadata
import importlib.util
import json
import re
import subprocess
from pathlib import Path

OS_RELEASE = (Path("/etc/os-release"), Path("/usr/lib/os-release"))  # the first that exists
# Where DeepSpeed's setup puts the ops it compiles (each op builder's absolute_name), under
# its package folder: the training ops (ops/adam/cpu_adam_op.*.so, ops/transformer/...) and
# the inference v2 kernels (inference/v2/ragged_ops.*.so, inference/v2/kernelsinference_core_ops.*.so,
# whose builder's name lacks a dot, inference/v2/kernels/ragged_ops/ragged_device_ops.*.so)
OP_FOLDERS = ("ops", "inference/v2")
_DPKG_FORMAT = "${Package}\t${Version}\t${Architecture}\t${db:Status-Abbrev}\n"


def deepspeed_folders() -> tuple:
    """DeepSpeed's package folders on sys.path, found without importing it (its __init__
    imports torch); () when it is not installed."""
    try:
        spec = importlib.util.find_spec("deepspeed")
    except (ImportError, ValueError):
        return ()
    if spec is None or not spec.submodule_search_locations:
        return ()
    return tuple(Path(folder) for folder in spec.submodule_search_locations)


def op_libraries(folders=None) -> tuple:
    """Every compiled DeepSpeed op library (*.so) under ops/ and inference/v2/ of each of
    ``folders`` (default: DeepSpeed's own), sorted by path."""
    folders = deepspeed_folders() if folders is None else folders
    found = set()
    for folder in folders:
        for below in OP_FOLDERS:
            where = Path(folder, below)
            if where.is_dir():
                found.update(library for library in where.rglob("*.so") if library.is_file())
    return tuple(sorted(found))


def op_name(library) -> str:
    """An op library's name, its file name before the first dot:
    cpu_adam_op.cpython-311-x86_64-linux-gnu.so -> cpu_adam_op."""
    return Path(library).name.split(".")[0]


def os_release(paths=OS_RELEASE) -> dict:
    """os-release(5) as {KEY: value}, the value's quotes removed; {} when there is none."""
    for path in paths:
        try:
            text = Path(path).read_text()
        except OSError:
            continue
        pairs = (line.strip().split("=", 1) for line in text.splitlines() if "=" in line)
        return {key: value.strip().strip('"').strip("'") for key, value in pairs if not key.startswith("#")}
    return {}


def debian_packages() -> list:
    """[(package, version, architecture)] of the packages dpkg has installed ("ii")."""
    shown = subprocess.run(
        ["dpkg-query", "-W", f"-f={_DPKG_FORMAT}"], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    rows = (line.split("\t") for line in shown.splitlines())
    return [tuple(fields[:3]) for fields in rows if len(fields) == 4 and fields[3].startswith("ii")]


def distributions() -> list:
    """[(name as its metadata spells it, version)] of the Python distributions this interpreter
    sees; one seen twice on sys.path (venv and system) counts once, the first found, as
    `pip list` shows them."""
    found, seen = [], set()
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        key = re.sub(r"[-_.]+", "-", name or "").lower()
        if name and key not in seen:
            seen.add(key)
            found.append((name, dist.version))
    return found


def inventory() -> dict:
    """What `python -m smoke.contents` prints, as a dict."""
    return {
        "os": os_release(),
        "debs": [list(deb) for deb in debian_packages()],
        "dists": [list(dist) for dist in distributions()],
        "ops": sorted(op_name(library) for library in op_libraries()),
    }


def main():
    print(json.dumps(inventory()))


if __name__ == "__main__":
    main()
