"""`python -m builder verify`: a published version's files are the ones that were published.

Every file of the version, the image and the module files included, is listed with its
sha256 in SHA256SUMS (`sha256sum -c SHA256SUMS` in the folder checks the same without the
builder), and modulefiles/NAME/ must link to the module files publish.json lists. A changed,
truncated or missing file, an unlisted file in bin/, a module file that is not that link, or a
smoke report that no longer passes or names another image fails the check; so does a file added
to a kept bundle/ (kept_bundle.py), whose files and manifest are listed like the rest. What an interrupted
publish left is first undone or finished as the next publish would (`placing.settle`): a
version it had moved aside is renamed back, and verify says so.
"""

import json
import os
from pathlib import Path

from hpcml_facts import PASS, FactsError, SmokeReport

from .. import contract
from ..errors import CheckFailed, RecipeError
from ..fileio import sha256_file
from ..host.which_apptainer import ready_apptainer
from ..published import IMAGE
from . import kept_bundle, signing
from .placing import settle

SUMS = "SHA256SUMS"


def _smoke_verdict(report: Path):
    """The verdict of the smoke report published beside the image; None when unreadable."""
    try:
        return SmokeReport.from_json(json.loads(report.read_text()), str(report)).verdict
    except (OSError, ValueError, FactsError):
        return None


def locate(prefix, spec):
    """(name, version, folder) of a published NAME/VERSION."""
    if spec.count("/") != 1 or not all(spec.split("/")):
        raise RecipeError(f"{spec!r}: expected NAME/VERSION, such as pytorch/2.7", file="command line")
    name, version = spec.split("/")
    root = Path(prefix).resolve() / name / version
    settle(root)
    if not (root / SUMS).is_file():
        raise RecipeError(f"{spec} is not published here (no {SUMS})", file=str(root))
    return name, version, root


def verify(prefix, spec, key=None):
    """``key``: a PEM public key the image must be signed with (the one the caller trusts)."""
    trusted = signing.fingerprint(key) if key else ""  # a bad key file: one line, exit 2
    name, version, root = locate(prefix, spec)
    listed = {}
    for number, line in enumerate((root / SUMS).read_text().splitlines(), 1):
        checksum, _, relative = line.partition("  ")
        if len(checksum) != 64 or not relative:
            raise CheckFailed(f"{root / SUMS}:{number}: not a sha256sum line")
        listed[relative] = checksum
    problems = []
    for relative, checksum in listed.items():
        path = root / relative
        if not path.is_file():
            problems.append(f"{relative}: missing")
        elif sha256_file(path) != checksum:
            size = path.stat().st_size
            problems.append(f"{relative}: changed (sha256 differs; {size} bytes now)")
    problems += [
        f"{path.relative_to(root)}: not published (an added file)"
        for folder in ("bin", kept_bundle.KEPT)
        for path in sorted((root / folder).rglob("*"))
        if path.is_file() and not path.is_symlink() and str(path.relative_to(root)) not in listed
    ]
    try:
        manifest = json.loads((root / "publish.json").read_text())
    except (OSError, ValueError):
        manifest = {}
        problems.append("publish.json: missing or not JSON")
    modules = root.parent.parent / "modulefiles" / name
    links = manifest.get("modules") if isinstance(manifest.get("modules"), dict) else {}
    for entry, file in links.items():  # none listed: an older builder's copies
        target = f"../../{name}/{version}/{file}"
        if not (modules / entry).is_symlink() or os.readlink(modules / entry) != target:
            problems.append(f"../../modulefiles/{name}/{entry}: not the link to {file} it was published with")
    if manifest.get("smoke") == "passed":
        if _smoke_verdict(root / contract.SMOKE_REPORT) != PASS:
            problems.append(f"{contract.SMOKE_REPORT}: no longer a passing report")
    signer = manifest.get("signing_key")
    problems += _signature_problems(root, signer, key, trusted)
    if problems:
        for problem in problems:
            print(f"FAIL {root}/{problem}")
        raise CheckFailed(
            f"{name}/{version}: {len(problems)} problem(s) in {root}; publish it again (--force) from a good image"
        )
    smoke = (
        "smoke tests passed"
        if manifest.get("smoke") == "passed"
        else "smoke tests NOT RUN (published with --skip-smoke)"
    )
    linked = f"; modulefiles/{name}/{', '.join(links)} link to them" if links else ""
    signed = f"; signature verified (key {signer})" if signer else "; not signed at publish"
    print(
        f"{name}/{version}: all {len(listed)} files match their checksums "
        f"(image sha256 {listed.get('image.sif', '?')[:16]}...){linked}; {smoke}{signed}"
    )
    kept = kept_bundle.summary(root)
    if kept:
        print(f"{name}/{version} source bundle: {kept}")


def _signature_problems(root, signer, key, trusted) -> list:
    """The image against the key it was published with (and against ``key``, if given)."""
    if not signer and not key:
        return []
    if key and trusted != signer:
        return [f"image.sif: published with signing key {signer or 'none'}, not {key} ({trusted})"]
    public = Path(key) if key else root / signing.PUBLIC_KEY  # a given key's print was compared above
    try:
        if not key and signing.fingerprint(public) != signer:
            return [f"{signing.PUBLIC_KEY}: not the key it was published with ({signer})"]
        signing.check_signature(ready_apptainer(None), root / IMAGE, public)
    except RecipeError as error:
        return [f"image.sif: {error.message}"]
    return []
