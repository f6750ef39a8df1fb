"""What a new lock changes against the one it replaces, a line a package, for `hpcml lock`
to print before the file is written: a refresh (`--update`) that takes a security fix says
which package moved, from which version to which.

Example:
    changes({"apt": "2.6.1", "bash": "5.2.15-2+b7"}, {"apt": "2.6.2", "bash": "5.2.15-2+b7", "curl": "7.88"})
    # -> ["apt 2.6.1 -> 2.6.2", "curl 7.88 added"]
"""

from ..lockfile import DebianLock, PythonLock


def versions(lock) -> dict:
    """{name: version} of a DebianLock's packages or a PythonLock's pins ({} for None)."""
    if isinstance(lock, DebianLock):
        return {package.name: package.version for package in lock.packages}
    if isinstance(lock, PythonLock):
        return {pin.name: pin.version for step in lock.steps for pin in step.pins}
    return {}


def changes(old: dict, new: dict) -> list:
    """A line per name whose version moved, that came or that went, sorted by name."""
    lines = []
    for name in sorted(old.keys() | new.keys()):
        was, now = old.get(name), new.get(name)
        if was is None:
            lines.append(f"{name} {now} added")
        elif now is None:
            lines.append(f"{name} {was} removed")
        elif was != now:
            lines.append(f"{name} {was} -> {now}")
    return lines


def report(path: str, old, new) -> list:
    """The lines `hpcml lock` prints for a lock file it writes: what moved, indented under
    a line that counts it; none for a new file or one whose versions are the same."""
    if old is None:
        return []
    moved = changes(versions(old), versions(new))
    if not moved:
        return []
    return [f"  {path}: {len(moved)} {'change' if len(moved) == 1 else 'changes'}", *(f"    {line}" for line in moved)]
