"""The Python half of a bundle: every file a target's Python lock names (the wheels for the
image's platform, DeepSpeed's sdist), under `python/`, a folder pip reads as its find-links
with no index at all. Where each file is served is asked of uv, against the same sources the
build's pip uses (host/uv.py); only a file whose sha256 the lock holds is taken.

Example: files(lock, down=[]) -> {"python/numpy-2.4.6-cp311-...whl": ("https://.../numpy-...whl",
"89cd...")}
"""

from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

from ..errors import ToolError
from ..host import uv
from ..lockfile import normal_name

FOLDER = "python"


def files(lock, down=()) -> dict:
    """{path in the bundle: (url, sha256)} for every file ``lock`` (a PythonLock) names; the
    pip indexes in ``down`` are not asked. One line names the first file no source serves."""
    pins = {pin.name: pin for step in lock.steps for pin in step.pins}
    words = {word for step in lock.steps for word in step.asked.split()}
    options = sorted(w for w in words if w.startswith(("--only-binary=", "--no-binary=")))
    pinned = {pin.name: pin.version for pin in pins.values()}
    packages = served_files(
        pinned,
        lock.python,
        lock.platform,
        f"the files of {lock.path}",
        indexes=indexes(lock),
        down=down,
        options=options,
    )
    return taken(packages, pins, FOLDER, lock.path)


def taken(packages, pins: dict, folder: str, lock_path) -> dict:
    """{path under ``folder``: (url, sha256)} of each served file whose sha256 a pin ({normal
    name: Pinned}) holds; one line names the first locked file no source serves."""
    found = {}
    for package in packages:
        pin = pins[normal_name(package["name"])]
        for served in uv.files(package):
            sha256 = served.get("hashes", {}).get("sha256")
            if sha256 in pin.hashes:
                found[sha256] = (f"{folder}/{file_name(served)}", served["url"])
    for pin in pins.values():
        for sha256 in pin.hashes:
            if sha256 not in found:
                raise ToolError(
                    f"{pin.name} {pin.version}: no pip source serves its file with sha256 {sha256} "
                    f"({lock_path}); bundle where the sources that made the lock answer"
                )
    return {path: (url, sha256) for sha256, (path, url) in found.items()}


def served_files(pinned: dict, python: str, platform: str, what: str, **sources) -> list:
    """uv's packages (pylock.toml's) serving exactly ``pinned`` ({name: version}) for the
    Python and platform, asked of the pip sources as the build's pip would ask them;
    ``what`` names them in the one line that says no source answered."""
    requirements = [f"{name}=={version}" for name, version in pinned.items()]
    packages, error = uv.compile_pylock(requirements, python, platform, no_deps=True, **sources)
    if packages is None:
        reason = " ".join(line.strip() for line in error.strip().splitlines()[-2:])
        raise ToolError(f"could not ask the pip sources for {what}: {reason}")
    return packages


def check_against_lock(lock, listed: dict) -> None:
    """Offline, for a build: each pin has a file in the bundle's list with a sha256 the lock
    holds, and no file under python/ is one the lock does not name."""
    hashes = {h: pin for step in lock.steps for pin in step.pins for h in pin.hashes}
    present = {sha256 for path, sha256 in listed.items() if path.startswith(f"{FOLDER}/")}
    for path, sha256 in sorted(listed.items()):
        if path.startswith(f"{FOLDER}/") and sha256 not in hashes:
            raise ToolError(f"{path}: the bundle holds a file {lock.path} does not name (sha256 {sha256})")
    for step in lock.steps:
        for pin in step.pins:
            if not present & set(pin.hashes):
                raise ToolError(f"{pin.name} {pin.version}: none of its locked files is in the bundle ({lock.path})")


def indexes(lock) -> list:
    """The --extra-index-url values of the lock's steps (PyTorch's index for torch)."""
    return list(dict.fromkeys(url for step in lock.steps for url in step.extra_indexes()))


def file_name(served) -> str:
    """The file's own name, as the source serves it (never a path)."""
    name = served.get("name") or PurePosixPath(unquote(urlsplit(served["url"]).path)).name
    if not name or "/" in name or name.startswith("."):
        raise ToolError(f"{served.get('url')}: cannot tell the file's name")
    return name
