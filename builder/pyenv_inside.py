"""Runs inside the image, under its own venv's Python (`python -I`), for `hpcml env build`
(layerbuild/pyenv.py binds it in with the lock): makes the project env at ROOT, the folder
the wrapper later binds the env's squashfs at.

    python -I pyenv_inside.py ROOT LOCK TARGET EXPECTED
    python -I -c "$(cat pyenv_inside.py)" --facts

EXPECTED: "-", or the image distributions' digest a lock of a target without a lock of its own
was made against (the build stops when the image holds others). --facts prints what `env lock`
reads of such an image: its Python, glibc, distributions and their digest, as JSON.

1. a venv at ROOT without pip, whose site-packages reads the image venv's after its own (a
   .pth line, so the image's .pth files run too), and ROOT/site-packages, a link to it, for
   the wrapper's PYTHONPATH: the image's own Python (torchrun's workers) sees the env as well;
2. the lock installed by the image's pip (--no-deps --require-hashes), once none of its pins
   is a distribution the image holds (a lock edited by hand would replace it); sdists built
   with the image's setuptools and compilers (--no-build-isolation: no tool outside the lock);
3. `pip check` on the env's distributions (what the image's %test checks of its own is the
   image's business);
4. ROOT/bin/hpcml-pyenv-check, which runs a command once it finds itself on the image it was
   built for: the sha256 of the names of the image's .dist-info folders (name and version of
   every distribution), read again at each start;
5. the record, ROOT/hpcml-pyenv.json (RECORD): the image's digest, its Python, the env's
   distributions; the builder adds the lock's facts to it.

Standard library only, and nothing of the host: the builder hands in every value it needs.
A failure ends with one line starting with the builder's failure marker.
"""

import glob
import hashlib
import json
import os
import platform
import subprocess
import sys
import sysconfig
import venv

MARKER = "hpcml-error: "  # builder/contract.py's FAILURE_MARKER; the build reports that line
CHECK = "bin/hpcml-pyenv-check"
RECORD = "hpcml-pyenv.json"
# a .pth line that adds a site folder once: site.addsitedir reads a folder's .pth files even
# when it knows the folder, so two folders that name each other would recurse without end
PTH_LINE = "import site, sys; {site!r} in sys.path or site.addsitedir({site!r})\n"
CHECK_TEXT = """#!/bin/sh
# Written by hpcml env build: runs the command it is given once it finds this env on the image
# it was built for (the wrapper starts each command through it, with SING_PYENV set).
# shellcheck disable=SC2041  # the image's site-packages: one folder, or two
found="$(for site in {sites}; do for info in "$site"/*.dist-info; do
    [ -e "$info" ] && printf '%s\\n' "${{info##*/}}"; done; done | LC_ALL=C sort | sha256sum)"
if [ "${{found%% *}}" != {digest} ]; then
    printf 'error: singularity_wrapper: SING_PYENV: the env was built for another image (%s, %s); ' \\
        {target} {built_on} >&2
    echo 'this image holds other distributions; build the env on it: hpcml env build TARGET LOCK' >&2
    exit 2
fi
exec "$@"
"""


def fail(message):
    print(MARKER + message, file=sys.stderr, flush=True)
    sys.exit(1)


def image_sites() -> list:
    """The image venv's site-packages folders (purelib and platlib are one on Debian)."""
    return sorted({sysconfig.get_path("purelib"), sysconfig.get_path("platlib")})


def distributions_digest(sites) -> str:
    """sha256 of the .dist-info folder names of ``sites``, one a line, sorted bytewise: what
    the check script computes with sh, sort and sha256sum."""
    names = sorted(os.path.basename(p) for site in sites for p in glob.glob(os.path.join(site, "*.dist-info")))
    return hashlib.sha256("".join(f"{name}\n" for name in names).encode()).hexdigest()


def held_by_image(sites) -> dict:
    """{normal name: version} of the image's distributions, from their .dist-info names."""
    held = {}
    for site in sites:
        for info in glob.glob(os.path.join(site, "*.dist-info")):
            name, _, version = os.path.basename(info)[: -len(".dist-info")].rpartition("-")
            held[normal(name)] = version
    return held


def replaced(lock, held) -> list:
    """'name (the image's version)' of each pin of the lock the image holds already."""
    found = []
    with open(lock, encoding="utf-8") as lines:
        for line in lines:
            name = line.split("==", 1)[0].strip()
            if line[:1].isalnum() and "==" in line and normal(name) in held:
                found.append(f"{normal(name)} (the image holds {held[normal(name)]})")
    return found


def quoted(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def make_venv(root, sites) -> str:
    """The venv, chained to the image's; its site-packages folder."""
    venv.EnvBuilder(symlinks=True, with_pip=False).create(root)
    python = os.path.join(root, "bin", "python")
    purelib = subprocess.run(
        [python, "-I", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    with open(os.path.join(purelib, "_hpcml_image.pth"), "w") as pth:
        pth.write("".join(PTH_LINE.format(site=site) for site in sites))
    os.symlink(os.path.relpath(purelib, root), os.path.join(root, "site-packages"))
    return purelib


def install(root, lock):
    pip = [os.path.join(root, "bin", "python"), "-m", "pip"]
    flags = ["--disable-pip-version-check", "--no-input", "--no-color"]
    result = subprocess.run(
        [*pip, "install", *flags, "--no-deps", "--require-hashes", "--no-build-isolation"]
        + ["--no-warn-script-location", "-r", lock]
    )
    if result.returncode != 0:
        fail("pip could not install the env's lock on the image (its output is above)")


def unmet(root, ours) -> list:
    """`pip check`'s lines about the env's own distributions."""
    pip = [os.path.join(root, "bin", "python"), "-m", "pip", "check", "--disable-pip-version-check"]
    result = subprocess.run(pip, capture_output=True, text=True)
    return [line for line in result.stdout.splitlines() if normal(line.split(" ", 1)[0]) in ours]


def env_distributions(purelib) -> list:
    """[name, version] of each distribution the env holds, from its metadata."""
    found = []
    for info in sorted(glob.glob(os.path.join(purelib, "*.dist-info"))):
        fields = {}
        with open(os.path.join(info, "METADATA"), encoding="utf-8") as metadata:
            for line in metadata:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
        found.append([fields.get("Name", ""), fields.get("Version", "")])
    return found


def normal(name: str) -> str:
    out = name.lower()
    for character in "_.":
        out = out.replace(character, "-")
    return out


def held_facts(sites) -> dict:
    """What `env lock` reads of an image whose target has no lock."""
    return {
        "python": f"{sys.version_info[0]}.{sys.version_info[1]}",
        "glibc": platform.libc_ver()[1],
        "distributions_sha256": distributions_digest(sites),
        "pins": sorted(held_by_image(sites).items()),
    }


def main(argv):
    if argv == ["--facts"]:
        print(json.dumps(held_facts(image_sites())))
        return
    root, lock, target, expected = argv
    os.umask(0o022)
    sites = image_sites()
    digest = distributions_digest(sites)
    if expected not in ("-", digest):
        fail(
            f"the image holds other distributions (sha256 {digest[:12]}) than the one the lock was made "
            f"against ({expected[:12]}); lock the requirements again on this image: hpcml env lock {target} FILE"
        )
    clashes = replaced(lock, held_by_image(sites))
    if clashes:  # a lock edited by hand, or made against another image
        fail("the lock names distributions the image holds, which an env never replaces: " + ", ".join(clashes))
    purelib = make_venv(root, sites)
    install(root, lock)
    held = env_distributions(purelib)
    problems = unmet(root, {normal(name) for name, _ in held})
    if problems:
        fail("the env's requirements are not met on this image: " + "; ".join(problems))
    check = os.path.join(root, CHECK)
    with open(check, "w") as script:
        script.write(
            CHECK_TEXT.format(
                sites=" ".join(quoted(site) for site in sites),
                digest=digest,
                target=quoted(target),
                built_on=quoted(f"image distributions sha256 {digest[:12]}"),
            )
        )
    os.chmod(check, 0o755)
    facts = {
        "target": target,
        "image_distributions_sha256": digest,
        "image_sites": sites,
        "python": f"{sys.version_info[0]}.{sys.version_info[1]}",
        "distributions": held,
    }
    with open(os.path.join(root, RECORD), "w") as out:
        json.dump(facts, out, indent=1, sort_keys=True)
        out.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
