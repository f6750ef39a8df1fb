"""uv's `pip compile`, run against the sources a build's pip uses: the host pip's index, its
extra indexes and wheel folders (find-links), less those that do not answer, and the
recipe's own indexes. `hpcml lock` resolves with it (builder/locking/python.py); a build asks
it, before anything is built, whether every locked file is still served
(builder/layerbuild/drift.py). The PEP 751 output (pylock.toml) names each file and its sha256.

Example: compile_pylock(["torch==2.13.0"], "3.11", "x86_64-manylinux_2_36", indexes=[url])
-> [{"name": "torch", "version": "2.13.0+cpu", "wheels": [...]}, ...], or a CompletedProcess
with uv's error when it cannot.
"""

import os
import re
import tempfile
import tomllib
from pathlib import Path

from .. import runner
from ..lockfile import normal_name
from . import hostinfo

TIMEOUT_S = 600  # uv asks the indexes itself, with its own retries
# uv's words for a pin it cannot find: "Because there is no version of regex==2026.11.19"
_NOT_FOUND = re.compile(r"no version of ([A-Za-z0-9._-]+)==(\S+?)[\s,]")


def compile_pylock(
    requirements, python, platform, *, indexes=(), down=(), constraints=(), options=(), no_deps=False, find_links=()
):
    """(packages, None) as uv's pylock.toml lists them, or (None, uv's stderr) when it fails.
    ``options``: pip's --only-binary=X and --no-binary=X, passed to uv in its own words;
    ``find_links``: wheel folders of the caller's besides the host pip's."""
    with tempfile.TemporaryDirectory(prefix="hpcml-uv-") as work:
        work = Path(work)
        (work / "requirements.in").write_text("".join(f"{r}\n" for r in requirements))
        (work / "constraints.txt").write_text("".join(f"{c}\n" for c in constraints))
        argv = [_uv(), "pip", "compile", "--no-config", "--quiet", "--format", "pylock.toml"]
        argv += ["--python-version", python, "--python-platform", platform, "--index-strategy", "unsafe-best-match"]
        argv += source_options(indexes, down) + ["--no-deps"] * no_deps
        for folder in find_links:
            argv += ["--find-links", str(folder)]
        for option in options:
            flag, _, value = option.partition("=")
            argv += [flag, value]
        argv += ["-c", "constraints.txt", "-o", "pylock.out.toml", "requirements.in"]
        result = runner.run(argv, cwd=work, env=_env(), check=False, timeout=TIMEOUT_S)
        if result.returncode != 0:
            return None, result.stderr
        return tomllib.loads((work / "pylock.out.toml").read_text())["packages"], None


def source_options(indexes=(), down=()) -> list:
    pip = hostinfo.pip_settings()
    argv = ["--index-url", pip["index_url"]] if pip["index_url"] else []
    for url in dict.fromkeys([*pip["extra_index_urls"], *indexes]):
        if url and url not in down:
            argv += ["--extra-index-url", url]
    for folder in pip["find_links"]:
        argv += ["--find-links", folder]
    return argv


def missing_pin(error: str):
    """The name (PEP 503's form) of the pin uv's error says no source serves, or None."""
    found = _NOT_FOUND.search(error)
    return normal_name(found[1]) if found else None


def files(package) -> list:
    """The files uv names for a package: the wheels for the platform, else the sdist."""
    return package.get("wheels") or ([package["sdist"]] if "sdist" in package else [])


def _uv() -> str:
    """The uv that came with the builder (its wheel holds the binary), else the one on PATH."""
    try:
        from uv import find_uv_bin
    except ImportError:
        return "uv"
    return find_uv_bin()


def _env() -> dict:
    """uv with the host's CA bundle."""
    env = dict(os.environ)
    cert = hostinfo.pip_settings()["cert"]
    if cert:
        env["SSL_CERT_FILE"] = cert
    return env
