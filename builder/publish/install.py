"""`python -m builder publish`: install a built, smoke-tested image as a site module.

    PREFIX/<name>/<version>/   image.sif, bin/ (wrapper, site settings, entry points),
                               recipe.json, smoke.json, sbom.cdx.json, CHANGES.txt, publish.json,
                               module.lua, module.tcl, SHA256SUMS; with --bundle DIR its
                               bundle.SHA256SUMS, with --with-bundle the bundle/ too (kept_bundle.py)
    PREFIX/modulefiles/<name>/<version>.lua -> ../../<name>/<version>/module.lua
    PREFIX/modulefiles/<name>/<version>     -> ../../<name>/<version>/module.tcl  (with --tcl)
    PREFIX/modulefiles/<name>/.version        the default, with --default

The version folder is assembled in a hidden folder beside its place and put there with its
module files in one rename (placing.py); a publish killed at any step leaves each version as it
was or wholly the new one, and the next publish removes what it left.
"""

import json
import os
import re
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from hpcml_facts import FAIL, NOT_MEASURED, PASS, FactsError, SmokeReport

from .. import __version__, contract, faults, resources, sbom
from ..errors import CheckFailed, RecipeError
from ..fileio import copy_hashed, sha256_file, write_atomic
from ..host import sidecar
from ..host.images import IMAGE_SUM, built_image, checked_labels, image_lock
from ..host.which_apptainer import ready_apptainer
from ..invocation import hint
from ..published import IMAGE, MANIFEST
from ..recipes import driver_fit
from ..render.sitefile import render_site
from ..values.check import single_line
from . import kept_bundle, release_notes, signing
from .modulefile import ENTRY_POINTS, module_for, render_default, render_entry, render_lua, render_tcl
from .placing import fix_modules, link_target, lock, module_files, move_into_place, recover, symlink_atomic
from .verify import SUMS, locate

# No "+" or "@": Environment Modules reads them as variant and version specifiers. Matched
# whole (fullmatch): `$` alone would let a name end in a newline.
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class PublishRequest:
    """What `publish` was asked for. Example: PublishRequest(target="cpu", prefix="/appl/ml",
    name="pytorch", images=Path("images"), default=True)."""

    target: str
    prefix: str
    name: str = "pytorch"
    version: str = ""  # default: <torch version>-<target>
    site: str = ""  # default: the target's first
    images: Path = Path("images")
    smoke_dir: str = ""  # default: IMAGES/<target>.smoke
    default: bool = False  # make this the default version
    force: bool = False  # replace a published version
    skip_smoke: bool = False  # publish without a passing smoke report
    tcl: bool = False  # a Tcl module file too
    key: str = ""  # a PEM public key: publish only an image signed with its private half
    bundle: str = ""  # the source bundle the image was built from: its manifest is kept (kept_bundle.py)
    with_bundle: bool = False  # the whole bundle kept, as bundle/


def publish(tree, request: PublishRequest):
    key = Path(request.key) if request.key else None  # a bad key file: one line, before anything
    signer = signing.fingerprint(key) if key else ""
    built = built_image(tree, request.target, request.images, request.site or None)
    target, site, image = built.target, built.site, built.path
    driver_fit.require(tree, target, site)  # a module its users' nodes could not run: refused
    name, target_name, apptainer = request.name, request.target, ready_apptainer(site)
    labels = checked_labels(apptainer, built)  # an image of another target: refused before anything is made
    kept = kept_bundle.checked(tree, target.name, request.bundle, request.with_bundle)  # another's: refused too
    # shared with smoke runs and other publishes: no build replaces the image meanwhile
    with image_lock(request.images, target.name, shared=True):
        prefix = _check_prefix(request.prefix)
        version = request.version or f"{labels.get('version.torch', 'unknown')}-{target_name}"
        _check_names(name, version)
        smoke_dir = Path(request.smoke_dir or request.images / f"{target_name}.smoke")
        smoke, tested = (None, "") if request.skip_smoke else _passed_report(smoke_dir, image)
        if key:  # unsigned, another key's, or changed since: refused before any folder is made
            signing.check_signature(apptainer, image, key)
        # made at build time; an image built before SBOMs existed gets its own now
        contents = sbom.ensure(target, image, sidecar.current_key(image) or "unrecorded", apptainer=apptainer)
        root = prefix / name / version
        modules = prefix / "modulefiles" / name
        _make_dirs(root.parent, modules)
        with lock(root.parent):
            for line in recover(root.parent, modules):
                print(line)
            if root.exists() and not request.force:
                raise RecipeError(f"{name}/{version} is already published; --force replaces it", file=str(root))
            files = module_files(version, request.tcl)
            staging = Path(tempfile.mkdtemp(prefix=f".{version}.partial-", dir=root.parent))
            try:
                checksum = copy_hashed(image, staging / IMAGE)
                module = module_for(target, site, name, version, root, labels, smoke, checksum, signer)
                report = None if smoke is None else smoke_dir / contract.SMOKE_REPORT
                release_notes.place(staging, contents, root.parent, version)
                _assemble(staging, checksum, site, module, labels, files, target_name, report, key, signer, kept)
                if smoke is not None and tested != checksum:
                    raise CheckFailed(
                        f"{smoke_dir / contract.SMOKE_REPORT}: the report is of another image (sha256 "
                        f"{tested[:12] or 'not recorded'}, {image} has {checksum[:12]}); "
                        "run the smoke tests on this build"
                    )
                faults.point("publish:staged")
                _link_modules(modules, files, name, version)
                faults.point("publish:linked")
                move_into_place(staging, root)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                try:
                    recover(root.parent, modules)  # links of a version that was not moved in
                except OSError:
                    pass  # the next publish retries; keep the first error
                raise
            fix_modules(modules, name, version, files)  # drops a Tcl link of an earlier --tcl publish
            faults.point("publish:modules-done")
            if request.default:
                write_atomic(modules / ".version", render_default(version))
                faults.point("publish:default-written")
    print(_summary(request, f"{name}/{version}", f"{target_name} for {site.name}", root, checksum, smoke, signer))
    return root


def _summary(request, module, what, root, checksum, smoke, signer) -> str:
    """What publish says when done: where, the image, its checks, what changed since the
    previous version, how to load it."""
    signature = f"verified against {request.key} ({signer})" if signer else "not checked (no --key)"
    changes = release_notes.summary(root)
    bundle = kept_bundle.summary(root) or "none kept (no --bundle)"
    return (
        f"published {module} ({what}) in {root}\n"
        f"  image sha256 {checksum}; smoke report: {'SKIPPED (--skip-smoke)' if smoke is None else 'passed'}\n"
        f"  signature: {signature}\n"
        f"  {release_notes.CHANGES}: {changes}\n"
        f"  source bundle: {bundle}\n"
        f"  module use {root.parent.parent / 'modulefiles'}; module load {module}"
        + (" (the default)" if request.default else "")
    )


def _check_names(name, version):
    for what, value in (("--name", name), ("--version", version)):
        if not NAME_RE.fullmatch(value) or value.endswith(".lua"):
            raise RecipeError(
                f"{what} {value!r}: expected letters, digits and . _ - (not starting with . or -)",
                file="command line",
            )


def _link_modules(modules, files, name, version):
    """The same link text for every publish of this version: a published one keeps resolving
    to its own folder until the swap. A regular file of an older builder is replaced only
    after the swap, by fix_modules."""
    for entry, file in files.items():
        if (modules / entry).is_symlink() or not (modules / entry).exists():
            symlink_atomic(link_target(name, version, file), modules / entry)


def set_default(prefix, spec):
    name, version, root = locate(prefix, spec)
    modules = root.parent.parent / "modulefiles" / name
    with lock(root.parent):
        write_atomic(modules / ".version", render_default(version))
    print(f"{name}/{version} is now the default {name} in {modules.parent}")


def _check_prefix(prefix) -> Path:
    if not prefix:
        raise RecipeError(
            "--prefix is empty; expected the folder that holds published modules (make publish PREFIX=/appl/local/ml)",
            file="command line",
        )
    # in the module files, their help and publish's summary, as given (a NUL would stop
    # resolve() itself) and as resolved (a link's target, the working folder)
    single_line(prefix, "--prefix")
    path = Path(single_line(str(Path(prefix).resolve()), "--prefix, resolved,"))
    if not path.exists():  # never made here: a mistyped PREFIX would become a second module tree
        raise RecipeError(
            f"no such folder; expected the existing folder for published modules (a new one: mkdir -p {path})",
            file=str(path),
        )
    if not path.is_dir():
        raise RecipeError("not a directory; expected the folder for published modules", file=str(path))
    if path.is_dir() and path.stat().st_mode & stat.S_IWOTH:
        raise RecipeError(
            "world-writable: anyone could replace the published modules; expected a folder only admins can write",
            file=str(path),
        )
    return path


def _passed_report(smoke_dir: Path, image: Path):
    """(the report, the sha256 of the image it tested, or "" where none was recorded)"""
    report, recorded = smoke_dir / contract.SMOKE_REPORT, smoke_dir / IMAGE_SUM
    smoke = hint(f"make smoke TARGET={image.stem}", f"smoke {image.stem} --images {image.parent}")
    hint_text = f"run `{smoke}` (in a job on the site's GPU nodes), or publish with --skip-smoke"
    if not report.is_file():
        raise CheckFailed(f"{report}: no smoke report; {hint_text}")
    try:
        data = SmokeReport.from_json(json.loads(report.read_text()), str(report))
    except (ValueError, FactsError) as error:
        raise CheckFailed(f"{report}: not a smoke report ({error}); {hint_text}") from None
    if data.verdict != PASS:
        failed = data.named(FAIL)
        raise CheckFailed(
            f"{report}: the smoke tests did not pass (verdict "
            f"{data.verdict!r}; failed: {', '.join(failed) or 'none'}); "
            "fix the image or the site, then run them again"
        )
    # a site reference the run did not measure (a sweep cut short) proves nothing about it
    unmeasured = [f"{name} ({why})" for name, why in data.named(NOT_MEASURED).items()]
    if unmeasured:
        raise CheckFailed(
            f"{report}: not measured: {'; '.join(unmeasured)}; run the smoke tests with the default sizes"
        )
    if not recorded.is_file():  # a run by hand (python -m smoke) records no image
        raise CheckFailed(
            f"{recorded}: missing, so the report does not say which image it tested; run `{smoke}`, "
            f"or, where the report is of this image: sha256sum {image} > {recorded}"
        )
    return data, (recorded.read_text().split() or [""])[0]


def _assemble(staging, checksum, site, module, labels, files, target_name, report, key, signer, kept):
    """Fill the staging folder around the image copied there (sha256 ``checksum``); ``key``
    and its fingerprint ``signer`` when the image's signature was checked; ``kept``: the
    source bundle (kept_bundle.checked), or None."""
    bin_dir = staging / "bin"
    (bin_dir / "sites").mkdir(parents=True)
    shutil.copyfile(resources.wrapper(), bin_dir / "singularity_wrapper")
    os.symlink("singularity_wrapper", bin_dir / "apptainer_wrapper")
    (bin_dir / "sites" / f"{site.name}.sh").write_text(render_site(site))
    for command in ENTRY_POINTS:
        (bin_dir / command).write_text(render_entry(command, f"{module.name}/{module.version}", site.name))
    recipe = json.loads(labels.get("recipe", "{}"))
    (staging / "recipe.json").write_text(json.dumps(recipe, indent=2, sort_keys=True) + "\n")
    if report is not None:
        shutil.copyfile(report, staging / contract.SMOKE_REPORT)
    if key is not None:  # `verify` checks the image against it, and it against the fingerprint
        shutil.copyfile(key, staging / signing.PUBLIC_KEY)
    known = kept_bundle.place(staging, kept)  # {path: sha256}, each read back already
    # Both, with or without --tcl: a Tcl link left by an earlier publish never dangles.
    (staging / "module.lua").write_text(render_lua(module))
    (staging / "module.tcl").write_text(render_tcl(module))
    manifest = {
        "name": module.name,
        "version": module.version,
        "target": target_name,
        "site": site.name,
        "builder_version": __version__,
        "published": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "image_sha256": checksum,
        "recipe_sha256": labels.get("recipe.sha256"),
        "smoke": "skipped" if report is None else "passed",
        "signing_key": signer or None,
        "modules": files,
        "bundle": kept and kept.record(),
    }
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    _set_modes(staging)
    lines = [f"{checksum}  {IMAGE}"]
    lines += [
        f"{known.get(str(p.relative_to(staging))) or sha256_file(p)}  {p.relative_to(staging)}"
        for p in sorted(staging.rglob("*"))
        if p.is_file() and not p.is_symlink() and p.relative_to(staging) != Path(IMAGE)
    ]
    (staging / SUMS).write_text("\n".join(lines) + "\n")
    os.chmod(staging / SUMS, 0o644)
    os.chmod(staging, 0o755)


def _set_modes(folder: Path):
    """World-readable, writable by the owner only, whatever the umask."""
    for path in folder.rglob("*"):
        if path.is_symlink():
            continue
        executable = path.is_dir() or path.parent.name == "bin"
        os.chmod(path, 0o755 if executable else 0o644)


def _make_dirs(*folders):
    """Create missing folders as rwxr-xr-x whatever the umask; existing ones are left be."""
    for folder in folders:
        missing = [p for p in [folder, *folder.parents] if not p.exists()]
        for path in reversed(missing):
            path.mkdir(exist_ok=True)
            path.chmod(0o755)
