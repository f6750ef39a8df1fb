"""Stand-in shared objects compiled here with gcc: a libfabric that exports what the network
check looks for, and the like."""

import subprocess
from pathlib import Path

FABRIC_SYMBOLS = "int fi_getinfo(void) { return 0; } void fi_freeinfo(void) {} int fi_version(void) { return 1; }\n"


def gcc(out: Path, source: str, soname: str, *flags):
    """A shared object ``out`` from C ``source`` (undefined symbols allowed, as for any .so)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.parent / (out.name + ".c")
    src.write_text(source)
    subprocess.run(
        ["gcc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(out), str(src), *flags],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return out
