"""The Debian half of a bundle: a partial mirror of each archive the locks read, under
`<bundle>/debian/` (the suite and its updates pocket) and `<bundle>/debian-security/` (the
security pocket), laid out as the mirror is (dists/SUITE/{InRelease,Release,Release.gpg},
each locked component's binary-ARCH/Packages.xz, pool/.../*.deb), with Debian's own signed
files, so that debootstrap and apt, pointed at it (bundle/serve.py), check it with Debian's
key as they would online.

The Release files are checked with gpgv and the keyring when fetched (a file: mirror, a
test's, may be unsigned); each Packages.xz against the Release's SHA256, each .deb against its
Packages stanza's SHA256 and the lock's. Example:

    mirrors = {"debian": "http://MIRROR/debian", "debian-security": "http://MIRROR/debian-security"}
    files = fetch_indexes(locks, mirrors, bundle)  # {"debian/dists/bookworm/Release": "5f1e...", ...}
    files |= fetch_debs(locks, mirrors, bundle)    # {"debian/pool/main/b/bash/bash_5.2.15-2+b7_amd64.deb": ...}
    manifest.write(bundle, files)
    check_against_locks(locks, bundle, manifest.check(bundle))  # the build's, with no network
"""

import concurrent.futures
import hashlib
import lzma
import re
from pathlib import Path

from ..errors import ToolError
from ..fileio import write_bytes_atomic
from ..host import debian_index
from ..lockfile import DebPackage
from . import fetched, manifest, release
from .release import RELEASE_FILES

# what a Filename may be: a path a bundle's SHA256SUMS line allows
FILENAME = re.compile(rf"pool/{manifest.PATH}\.u?deb")
WORKERS = 4  # .debs fetched at once: a mirror answers each after a round trip


def fetch_indexes(locks, mirrors, bundle: Path) -> dict:
    """The Release files of each suite of ``locks`` (DebianLock) and of its pockets, the
    Packages.xz of each of their components and architectures and each component's
    Translation-en.xz, from ``mirrors`` ({archive: http, https or file URL}; a URL alone is
    the "debian" archive's), checked, under ``bundle``/ARCHIVE/dists; returns {path in the
    bundle: sha256} of what is there."""
    mirrors, written = _mirrors(mirrors), {}
    for (top, suite), (components, arches) in _suites(locks).items():
        mirror = mirrors[top]
        text = release.fetch_release(mirror, suite, top, bundle, written)
        sums, by_hash = release.sums(text), re.search(r"^Acquire-By-Hash: yes$", text, re.M)
        for path in _index_paths(sums, components, arches, f"{mirror}/dists/{suite}/Release"):
            relpath = f"{top}/dists/{suite}/{path}"
            _fetch_index(f"{mirror}/dists/{suite}", path, bundle / relpath, sums[path], by_hash)
            written[relpath] = sums[path]
        for path in _unpacked_paths(sums, components, arches):
            relpath = f"{top}/dists/{suite}/{path}"
            _unpack(bundle / f"{relpath}.xz", bundle / relpath, sums[path])
            written[relpath] = sums[path]
    return written


def _unpacked_paths(sums: dict, components, arches) -> list:
    """The plain Packages files the Release lists: a debootstrap prefers them to Packages.xz
    (Apptainer's toolbox's does), though mirrors serve only the compressed ones."""
    return [p for p in (f"{c}/binary-{a}/Packages" for c in components for a in arches) if p in sums]


def _unpack(packed: Path, dest: Path, sha256: str) -> None:
    data = lzma.decompress(_read(packed))
    if hashlib.sha256(data).hexdigest() != sha256:
        raise ToolError(f"{packed}: unpacks to other bytes than its Release lists for {dest.name}")
    write_bytes_atomic(dest, data)


def deb_files(locks, bundle: Path) -> dict:
    """{"ARCHIVE/FILENAME": (FILENAME, sha256)} for every package of ``locks``, as the bundle's
    Packages.xz indexes give them, so that its .deb is fetched with
    ``fetched.fetch(mirror + "/" + FILENAME, bundle / ARCHIVE / FILENAME, sha256)``. A
    package the indexes lack, or give another sha256 than the lock's, is a ToolError."""
    found = {}
    for _, _, relpath, filename, sha256 in _located(locks, bundle):
        if found.setdefault(relpath, (filename, sha256)) != (filename, sha256):
            raise ToolError(f"{bundle}/{relpath}: given two sha256s by the bundle's indexes")
    return found


def fetch_debs(locks, mirrors, bundle: Path, progress=None) -> dict:
    """Every .deb of ``locks`` from ``mirrors`` (as fetch_indexes takes them) into the bundle,
    checked (one locked in two stages is fetched once; one already there is kept); returns
    {path in the bundle: sha256}. ``progress`` (host/progress.Progress) gets a line for each
    .deb fetched."""
    mirrors = _mirrors(mirrors)
    todo = sorted(deb_files(locks, bundle).items())

    def one(item):
        relpath, (filename, sha256) = item
        url = f"{mirrors[relpath.split('/', 1)[0]]}/{filename}"
        if fetched.fetch(url, bundle / relpath, sha256) == "fetched" and progress:
            progress.step(f"fetched {filename}")
        return relpath, sha256

    pool = concurrent.futures.ThreadPoolExecutor(WORKERS)
    try:
        return dict(pool.map(one, todo))
    finally:
        pool.shutdown(cancel_futures=True)  # after a failure: the rest are not fetched


def check_against_locks(locks, bundle: Path, files: dict) -> None:
    """With no network, for a build from the bundle: ``files`` (its SHA256SUMS, {path:
    sha256}, checked) holds each suite's Release (and a signed InRelease that says the same,
    when listed), each Packages.xz with the sha256 the Release gives it, and each locked
    package's .deb with the lock's sha256; else a ToolError naming the file or package."""
    _check_releases(locks, bundle, files)
    for (top, suite), (components, arches) in _suites(locks).items():
        folder = f"{top}/dists/{suite}"
        sums = release.sums(_read(bundle / folder / "Release").decode("utf-8", errors="replace"))
        indexes = _index_paths(sums, components, arches, f"{bundle}/{folder}/Release")
        for path in indexes + _unpacked_paths(sums, components, arches):
            if files.get(f"{folder}/{path}") != sums[path]:
                raise ToolError(
                    f"{bundle}/{folder}/{path}: not in the bundle with the sha256 its Release gives; "
                    "make the bundle again with: hpcml bundle TARGET"
                )
    for package, lock, relpath, _, sha256 in _located(locks, bundle):
        if files.get(relpath) != sha256:
            raise ToolError(
                f"{bundle}/{relpath}: {package.name}={package.version} of {lock.path} is not in the bundle "
                f"with sha256 {sha256}; make the bundle again with: hpcml bundle TARGET"
            )


def _check_releases(locks, bundle: Path, files: dict) -> None:
    """Each suite's Release is in the bundle, and its InRelease, when listed, signed as online."""
    with release.trusted_keyring(bundle, files) as keyring:
        for top, suite in _suites(locks):
            folder = f"{top}/dists/{suite}"
            if f"{folder}/Release" not in files:
                raise ToolError(f"{bundle}/{folder}/Release: not in the bundle; make it again: hpcml bundle TARGET")
            if f"{folder}/InRelease" in files:
                listed = [name for name in RELEASE_FILES if f"{folder}/{name}" in files]
                release.verify({name: _read(bundle / folder / name) for name in listed}, bundle / folder, keyring)


def _mirrors(mirrors) -> dict:
    """{archive: URL without a trailing /}; a URL alone is the "debian" archive's."""
    given = {"debian": mirrors} if isinstance(mirrors, str) else mirrors
    return {top: url.rstrip("/") for top, url in given.items()}


def _suites(locks) -> dict:
    """{(archive, suite): (components, arches)} of ``locks`` and their pockets, each sorted,
    once each."""
    suites = {}
    for lock in locks:
        for where in lock.suites():
            components, arches = suites.setdefault(where, (set(), set()))
            components.update(lock.components)
            arches.add(lock.arch)
    return {where: (sorted(c), sorted(a)) for where, (c, a) in sorted(suites.items())}


def _index_paths(sums: dict, components, arches, release) -> list:
    """The indexes a bundle holds, as its Release names them: each component's Packages.xz
    for each architecture, and its English descriptions, Translation-en.xz, when the Release
    lists one (apt-get update asks for it, and fails when it is not there)."""
    paths = [f"{c}/binary-{a}/Packages.xz" for c in components for a in arches]
    missing = [path for path in paths if path not in sums]
    if missing:
        raise ToolError(f"{release} lists no {missing[0]}: not a Debian mirror of the locked suite")
    return paths + [f"{c}/i18n/Translation-en.xz" for c in components if f"{c}/i18n/Translation-en.xz" in sums]


def _wanted(locks) -> dict:
    """{(suites, arch, components): [(package, lock), ...]}: the indexes to read, each once;
    suites: ((archive, suite), ...), the suite and its pockets."""
    wanted = {}
    for lock in locks:
        key = (lock.suites(), lock.arch, tuple(lock.components))
        wanted.setdefault(key, []).extend((p, lock) for p in lock.packages)
    return wanted


def _located(locks, bundle: Path) -> list:
    """(package, lock, path in the bundle, Filename, sha256) of each package of ``locks``, as
    the bundle's indexes give them; a ToolError for one they lack or give another sha256.
    Where a pocket holds the locked version, the suite's own version comes too (the index's
    sha256 its proof): debootstrap takes its packages from the suite alone, and the stage's
    dist-upgrade then brings them up to the lock."""
    located = []
    for (suites, arch, components), packages in _wanted(locks).items():
        keys = {(p.name, p.version, p.arch) for p, _ in packages}
        names = {name for name, _, _ in keys}
        given, own = {}, {}
        # the suite first, then its pockets: a version in two of them is the suite's file
        for top, suite in suites:
            for component in components:
                index = bundle / top / "dists" / suite / component / f"binary-{arch}" / "Packages.xz"
                for key, stanza in _stanzas(index, names):
                    if key in keys:
                        given.setdefault(key, (top, index, stanza))
                    if (top, suite) == suites[0]:
                        own.setdefault(key[0], (key, (top, index, stanza)))
        for package, lock in packages:
            where = _given(given, package, lock, " and ".join(s for _, s in suites), arch)
            located.append(_entry(package, lock, *where))
            key, found = own.get(package.name, (None, None))
            if key and key != (package.name, package.version, package.arch) and key[2] == package.arch:
                located.append(_entry(DebPackage(*key), lock, *found))
    return located


def _entry(package, lock, top, index, stanza) -> tuple:
    filename, sha256 = stanza.get("Filename", ""), stanza.get("SHA256", "")
    if not FILENAME.fullmatch(filename) or ".." in filename.split("/"):
        raise ToolError(f"{index}: {package.name}={package.version} has no usable Filename ({filename!r})")
    if package.sha256 and sha256 != package.sha256:
        raise ToolError(
            f"{lock.path}: {package.name}={package.version} {package.arch} has sha256 {sha256 or 'none'} in "
            f"{index}, the lock names {package.sha256}: the mirror no longer serves what the lock names"
        )
    return package, lock, f"{top}/{filename}", filename, sha256


def _given(given: dict, package, lock, suite, arch):
    key = (package.name, package.version, package.arch)
    if key not in given:
        raise ToolError(
            f"{lock.path}: {package.name}={package.version} {package.arch} is not in the {suite} {arch} index "
            "of the bundle: the mirror no longer serves what the lock names; lock again (hpcml lock TARGET) "
            "or bundle from a mirror that keeps old versions"
        )
    return given[key]


def _stanzas(index: Path, names: set):
    """((Package, Version, Architecture), {field: value}) of the stanzas of ``index`` (a
    Packages.xz) whose Package is one of ``names``."""
    try:
        with lzma.open(index, "rt", encoding="utf-8", errors="replace") as handle:
            for fields in debian_index.read_stanzas(handle):
                if fields.get("Package") in names:
                    yield (fields["Package"], fields.get("Version"), fields.get("Architecture")), fields
    except FileNotFoundError:
        raise ToolError(f"{index}: missing from the bundle; make it again with: hpcml bundle TARGET") from None
    except (OSError, lzma.LZMAError, EOFError) as error:
        raise ToolError(f"{index}: not a readable Packages.xz ({error}); make the bundle again") from None


def _fetch_index(base: str, path: str, dest: Path, sha256: str, by_hash) -> None:
    """By hash when the mirror offers it (the Release read a moment ago names that file even
    when the mirror has moved on to a newer index since), else, as apt does, by name."""
    if by_hash:
        folder, _, _ = path.rpartition("/")
        try:
            fetched.fetch(f"{base}/{folder}/by-hash/SHA256/{sha256}", dest, sha256)
            return
        except ToolError:
            pass  # a partial mirror that copied the Release but not the by-hash folders
    fetched.fetch(f"{base}/{path}", dest, sha256)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise ToolError(f"{path}: cannot be read ({error.strerror}); make the bundle again") from None
