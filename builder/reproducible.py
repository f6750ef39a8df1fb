"""What makes two builds from the same commit and lock hold the same files, and the files that
still differ, each with its reason.

Every %post starts with a fixed build time and hash seed, and ends by removing what a build
leaves behind that is about the build, not the image (logs, caches):

  - SOURCE_DATE_EPOCH: Python then writes hash-based .pyc files (no source time in them),
    wheels built in the image get fixed zip times, useradd a fixed password-change day;
    mksquashfs and debootstrap, run by Apptainer, see it too (layerbuild). A fixed time, not
    the commit's: the definition is committed, so the commit's time cannot be in it.
  - PYTHONHASHSEED=0: setup.py files that build lists from sets (DeepSpeed's) write them in
    one order.
  - the tidy step: dpkg's and apt's logs, ldconfig's aux-cache (it records the time each
    folder was read), backup copies of dpkg's and debconf's databases, pip's cache.

Example: stage_post("final", ["apt-get update", ...]) -> ["export SOURCE_DATE_EPOCH=...", ...,
"apt-get update", ..., "echo '--- final: tidy'", "rm -rf ..."]
"""

SOURCE_DATE_EPOCH = 1767225600  # 2026-01-01T00:00:00Z
ENV = (("SOURCE_DATE_EPOCH", str(SOURCE_DATE_EPOCH)), ("PYTHONHASHSEED", "0"))

LEFT_BEHIND = (
    "/var/log/apt/*.log",
    "/var/log/apt/eipp.log.xz",
    "/var/log/dpkg.log",
    "/var/log/alternatives.log",
    "/var/log/bootstrap.log",
    "/var/cache/ldconfig/aux-cache",
    "/var/cache/debconf/*-old",
    "/var/lib/dpkg/*-old",
    "/root/.cache",
)

# Files two cold builds still write differently, with why: `hpcml verify --rebuild` leaves
# them out of the comparison (and the root file system's digest), and docs/building.md lists
# them. A path ending in / stands for everything under it.
DECLARED = (
    ("/.singularity.d/", "Apptainer's own: labels.json holds the build's date, Singularity the build arguments"),
)


def stage_post(stage: str, post: list) -> list:
    """A stage's %post lines between the fixed build time and the tidy step."""
    if not post:
        return post
    start = [f"export {name}={value}" for name, value in ENV]
    tidy = [f"echo '--- {stage}: tidy'", "rm -rf " + " ".join(LEFT_BEHIND)]
    return [*start, *post, *tidy]


def declared(path: str) -> bool:
    """Whether ``path`` (absolute, in the image) is one the comparison leaves out."""
    return any(path == entry or (entry.endswith("/") and path.startswith(entry)) for entry, _ in DECLARED)
