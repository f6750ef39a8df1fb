"""A publish killed at each step it takes (a real SIGKILL at builder.faults' points), on a file
system with renameat2's RENAME_EXCHANGE and as on one without (HPCML_NO_RENAME_EXCHANGE=1),
replacing a published version and adding a new one: each version published before is
byte-identical to before or fully the new publish, verify passes right after, and the next
publish cleans up. And two publishes of one version at the same moment."""

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT, run_builder
from helpers.publishing import lmod, publish, tcl_module

from builder.faults import STEPS
from builder.fileio import sha256_file

OLD_ARGS = ("--version", "1.0", "--default", "--tcl")  # smoke-tested
NEW_ARGS = ("--default", "--tcl", "--skip-smoke")  # so old and new differ in every module file
DEFAULT = "modulefiles/pytorch/.version"

# The steps each kind of publish reaches, in order. A new version has no swap: its one
# rename is the same with or without RENAME_EXCHANGE.
PATHS = {
    ("replacing", "exchange"): (
        "staged",
        "linked",
        "exchanged",
        "removing-old",
        "old-removed",
        "modules-done",
        "default-written",
    ),
    ("replacing", "fallback"): (
        "staged",
        "linked",
        "old-moved-aside",
        "new-moved-in",
        "removing-old",
        "old-removed",
        "modules-done",
        "default-written",
    ),
    ("new", "exchange"): ("staged", "linked", "new-moved-in", "modules-done", "default-written"),
    ("new", "fallback"): ("staged", "linked", "new-moved-in", "modules-done", "default-written"),
}
CASES = [(case, mode, step) for (case, mode), steps in PATHS.items() for step in steps]
VERSION = {"replacing": "1.0", "new": "9.9"}
# make test kills each step once (22 s a case), the three the module systems check among them;
# make test-full kills the other 16 cases too.
REPRESENTATIVE = {
    ("replacing", "exchange", "staged"),
    ("replacing", "exchange", "exchanged"),
    ("replacing", "exchange", "removing-old"),
    ("replacing", "exchange", "old-removed"),
    ("replacing", "fallback", "old-moved-aside"),
    ("replacing", "fallback", "new-moved-in"),
    ("new", "exchange", "linked"),
    ("new", "exchange", "modules-done"),
    ("new", "exchange", "default-written"),
}


@dataclass
class Site:
    prefix: Path
    snapshot: Path
    images: Path
    apptainer: str
    old: dict  # scan() of the prefix with 1.0 published
    refs: dict  # case: scan() after its publish ran to the end

    def restore(self):
        """The prefix with only 1.0 published, at its own path (module files name it): hard
        links to the snapshot, as publish only ever adds, renames and removes files."""
        shutil.rmtree(self.prefix, ignore_errors=True)
        subprocess.run(["cp", "-al", str(self.snapshot), str(self.prefix)], check=True)

    def publish(self, case, mode, kill=None, force=False):
        env = {
            "HPCML_APPTAINER": self.apptainer,
            "HPCML_KILL_AT": f"publish:{kill}" if kill else "",
            "HPCML_NO_RENAME_EXCHANGE": "1" if mode == "fallback" else "",
        }
        force = force or case == "replacing"
        return publish(
            self.images / "cpu.sif",
            self.prefix,
            "--version",
            VERSION[case],
            *NEW_ARGS,
            *(["--force"] if force else []),
            env=env,
        )

    def verify(self, version):
        return run_builder("verify", "--prefix", self.prefix, f"pytorch/{version}")


@pytest.fixture(scope="module")
def site(smoked, apptainer, tmp_path_factory):
    work = tmp_path_factory.mktemp("faults")
    prefix = work / "appl" / "ml"
    result = publish(smoked, prefix, *OLD_ARGS, env={"HPCML_APPTAINER": apptainer})
    assert result.returncode == 0, result.stderr
    subprocess.run(["cp", "-al", str(prefix), str(work / "snapshot")], check=True)
    site = Site(prefix, work / "snapshot", smoked.parent, apptainer, scan(prefix), {})
    for case in VERSION:  # what a publish that is not killed leaves
        site.restore()
        result = site.publish(case, "exchange")
        assert result.returncode == 0, result.stderr
        site.refs[case] = scan(prefix)
    return site


_HASHES = {}


def _sha256(path: Path) -> str:
    """sha256 of a file; an image (same inode, size and mtime) is read once."""
    info = path.stat()
    key = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
    if info.st_size < 1 << 20:
        return sha256_file(path)
    if key not in _HASHES:
        _HASHES[key] = sha256_file(path)
    return _HASHES[key]


def _value(path: Path) -> str:
    """A file's sha256; for the two files that hold the time of publishing, also the sha256
    of their text without it ("sha|timeless"), to tell one publish's files from another's."""
    digest = _sha256(path)
    if path.name == "publish.json":
        manifest = json.loads(path.read_text())
        manifest.pop("published")
        return digest + "|" + hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()
    if path.name == "SHA256SUMS":
        text = re.sub(r"^[0-9a-f]{64}(  publish\.json)$", r"\1", path.read_text(), flags=re.M)
        return digest + "|" + hashlib.sha256(text.encode()).hexdigest()
    return digest


def scan(folder: Path) -> dict:
    """{path: sha256 of a file, "-> target" of a link} under folder, hidden entries aside."""
    state = {}
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if any(part.startswith(".") and part != ".version" for part in relative.parts):
            continue
        if path.is_symlink():
            state[str(relative)] = "-> " + os.readlink(path)
        elif path.is_file():
            state[str(relative)] = _value(path)
    return state


def leftovers(prefix: Path) -> dict:
    """{.VERSION.partial-* or .VERSION.old-*: scan() of it}; nothing else hidden may be there."""
    found = {}
    for path in (prefix / "pytorch").iterdir():
        if path.name.startswith(".") and path.name != ".publish.lock":
            found[re.sub(r"-[a-z0-9_]{8}$", "-*", path.name)] = scan(path)
    stray = [
        p.name
        for p in (prefix / "modulefiles" / "pytorch").iterdir()
        if p.name.startswith(".") and p.name != ".version"
    ]
    assert not stray, stray
    return found


def exact(state):
    return {key: ("exact", value) for key, value in state.items()}


def timeless(state):
    return {key: ("timeless", value) for key, value in state.items()}


def differences(actual: dict, expected: dict) -> list:
    """Paths that differ: byte for byte where expected is "exact", else save the time of
    publishing (a new publish's files against those of one that ran to the end)."""
    found = sorted(set(actual) ^ set(expected))
    for key in set(actual) & set(expected):
        how, value = expected[key]
        if how == "timeless":
            value, actual_value = value.split("|")[-1], actual[key].split("|")[-1]
        else:
            actual_value = actual[key]
        if actual_value != value:
            found.append(key)
    return found


def _of(state, version):
    """The files of one version's folder, relative to it."""
    start = f"pytorch/{version}/"
    return {key[len(start) :]: value for key, value in state.items() if key.startswith(start)}


def _belongs(key, version):
    return key.startswith(f"pytorch/{version}/") or key in (
        f"modulefiles/pytorch/{version}.lua",
        f"modulefiles/pytorch/{version}",
    )


# After a kill at           replacing 1.0 (--force)             adding 9.9
#   staged                  old                                 old
#   linked                  old (the same links)                old + 9.9's links, dangling
#   old-moved-aside         1.0 whole in .1.0.old-*: verify     -
#                           or the next publish renames it back
#   exchanged, new-moved-in new (the old one hidden, removed    new, but .version still 1.0
#   removing-old            by the next publish)
#   old-removed             new                                 -
#   modules-done            new                                 new, but .version still 1.0
#   default-written         new                                 new
def expected(site, case, mode, step):
    """(what the prefix holds, what hidden folders it holds) after a kill at step: "old" is
    the prefix as it was, byte for byte; "new" is what the publish leaves when it runs to its
    end, the time it ran aside; every version it does not publish stays byte for byte."""
    version, old, ref = VERSION[case], site.old, site.refs[case]
    done = PATHS[case, mode].index(step)
    swapped = "exchanged" if mode == "exchange" else "new-moved-in"
    staged = {f".{version}.partial-*": timeless(_of(ref, version))}
    if case == "new" and step in ("staged", "linked"):
        links = {k: v for k, v in ref.items() if k.startswith("modulefiles/pytorch/9.9")}
        # links first, folder last: the new version's module files dangle until it is there
        return {**exact(old), **(exact(links) if step == "linked" else {})}, staged
    if case == "replacing" and done < PATHS[case, mode].index(swapped):
        if step == "old-moved-aside":  # the gap between the two renames
            visible = {k: v for k, v in old.items() if not k.startswith("pytorch/1.0/")}
            return exact(visible), {**staged, ".1.0.old-*": exact(_of(old, "1.0"))}
        return exact(old), staged  # the links are the same for old and new
    state = timeless(ref)
    state.update(
        {
            k: ("exact", v)
            for k, v in old.items()
            if not _belongs(k, version) and (k != DEFAULT or step != "default-written")
        }
    )
    hidden = {}
    if step in ("exchanged", "new-moved-in", "removing-old") and case == "replacing":
        hidden = {(".1.0.partial-*" if mode == "exchange" else ".1.0.old-*"): exact(_of(old, "1.0"))}
    return state, hidden


@pytest.mark.parametrize(
    "case, mode, step",
    [pytest.param(*c, id="-".join(c), marks=() if c in REPRESENTATIVE else pytest.mark.full) for c in CASES],
)
def test_a_publish_killed_at_a_step_leaves_each_version_whole(site, environment_modules, case, mode, step):
    site.restore()
    assert scan(site.prefix) == site.old and leftovers(site.prefix) == {}
    result = site.publish(case, mode, kill=step)
    assert result.returncode == -9, f"not killed at {step}: {result.returncode} {result.stderr}"
    visible, hidden = expected(site, case, mode, step)
    state = scan(site.prefix)
    assert differences(state, visible) == []
    found = leftovers(site.prefix)
    assert sorted(found) == sorted(hidden)
    for name, files in found.items():
        assert differences(files, hidden[name]) == [], name
    _module_systems_agree(site, environment_modules, case, mode, step, verified=False)

    check = site.verify("1.0")  # the version published before
    assert check.returncode == 0, check.stdout + check.stderr
    if step == "old-moved-aside":
        assert "restored " in check.stdout and "an interrupted publish had moved it" in check.stdout
        visible = exact(site.old)  # renamed back: as it was, byte for byte
    assert differences(scan(site.prefix), visible) == []
    if case == "new":
        check = site.verify("9.9")  # there only once it was moved in, and then whole
        there = step not in ("staged", "linked")
        assert check.returncode == (0 if there else 2), check.stdout + check.stderr
        assert there or "pytorch/9.9 is not published here" in check.stderr
    _module_systems_agree(site, environment_modules, case, mode, step, verified=True)

    again = site.publish(case, mode, force=True)
    assert again.returncode == 0, again.stderr
    assert leftovers(site.prefix) == {}
    assert differences(scan(site.prefix), expected(site, case, mode, "default-written")[0]) == []
    for version in {"1.0", VERSION[case]}:
        check = site.verify(version)
        assert check.returncode == 0 and "restored" not in check.stdout, check.stdout + check.stderr


def _module_systems_agree(site, modulecmd, case, mode, step, verified):
    """For three representative steps, right after the kill and after verify: what Lmod and
    Environment Modules load is the version the folder holds."""
    if (case, mode, step) == ("replacing", "fallback", "old-moved-aside") and not verified:
        # the gap between the two renames: the module file dangles, nothing half-old loads
        result = lmod("module load pytorch/1.0", site.prefix, site.apptainer)
        assert result.returncode != 0 and "unknown" in result.stderr, result.stderr
    elif (case, mode, step) == ("replacing", "fallback", "old-moved-aside"):
        # verify renamed it back: the old, smoke-tested version loads and runs
        result = lmod(
            'module load pytorch\necho "$HPCML_MODULE $SING_IMAGE"\n'
            "python -c 'import torch; print(torch.__version__)'\nmodule help pytorch/1.0",
            site.prefix,
            site.apptainer,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines() == [f"pytorch/1.0 {site.prefix}/pytorch/1.0/image.sif", "2.13.0+cpu"]
        assert "Smoke tests: passed" in result.stderr
    elif (case, mode, step) == ("replacing", "exchange", "exchanged") and verified:
        # one rename switched folder and module files: both systems see the new publish
        result = lmod("module load pytorch/1.0\nmodule help pytorch/1.0", site.prefix, site.apptainer)
        assert result.returncode == 0 and "Smoke tests: NOT RUN" in result.stderr, result.stderr
        result = tcl_module(modulecmd, site.prefix, site.apptainer, ["whatis pytorch/1.0"])
        assert result.returncode == 0 and "Smoke tests: NOT RUN" in result.stderr, result.stderr
    elif (case, mode, step) == ("new", "exchange", "linked") and not verified:
        # 9.9's module files dangle: neither system lists or picks it
        result = lmod('module -t avail pytorch\nmodule load pytorch\necho "$HPCML_MODULE"', site.prefix, site.apptainer)
        assert result.returncode == 0 and result.stdout == "pytorch/1.0\n", result.stderr
        assert "pytorch/1.0" in result.stderr and "9.9" not in result.stderr, result.stderr
        result = tcl_module(
            modulecmd, site.prefix, site.apptainer, ["avail pytorch", "load pytorch", '!echo "$LOADEDMODULES"']
        )
        assert result.returncode == 0 and result.stdout == "pytorch/1.0\n", result.stderr
        assert "9.9" not in result.stderr, result.stderr


def test_the_cases_reach_every_step_and_every_step_is_a_fault_point():
    source = "".join((ROOT / "builder" / "publish" / name).read_text() for name in ("install.py", "placing.py"))
    points = re.findall(r'faults\.point\("([^"]+)"\)', source)
    assert sorted(set(points)) == sorted(STEPS)
    assert {f"publish:{step}" for _, _, step in CASES} == set(STEPS)
    assert len(CASES) == 25
    assert {step for _, _, step in REPRESENTATIVE} == {step for _, _, step in CASES} and REPRESENTATIVE <= set(CASES)


@pytest.mark.parametrize("force", [False, True], ids=["plain", "force-fallback"])
def test_two_publishes_of_one_version_at_the_same_moment(site, tmp_path, force):
    """Both start while the name's lock is held, so both wait on it; released, one wins."""
    site.restore()
    env = dict(
        os.environ, PYTHONPATH=str(ROOT), HPCML_APPTAINER=site.apptainer, HPCML_NO_RENAME_EXCHANGE="1" if force else ""
    )
    command = [
        sys.executable,
        "-m",
        "builder",
        "publish",
        "cpu",
        "--images",
        str(site.images),
        "--prefix",
        str(site.prefix),
        "--version",
        "9.9",
        *NEW_ARGS,
        *(["--force"] if force else []),
    ]
    logs = [(tmp_path / f"{i}.out", tmp_path / f"{i}.err") for i in range(2)]
    with open(site.prefix / "pytorch" / ".publish.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        processes = []
        for out, err in logs:
            with open(out, "w") as stdout, open(err, "w") as stderr:
                processes.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=stdout, stderr=stderr))
        deadline = time.monotonic() + 120
        while not all("waiting for another publish of pytorch" in out.read_text() for out, _ in logs):
            assert time.monotonic() < deadline and all(p.poll() is None for p in processes), [
                err.read_text() for _, err in logs
            ]
            time.sleep(0.1)
    codes = [process.wait(timeout=300) for process in processes]
    errors = [err.read_text() for _, err in logs]
    if force:
        assert codes == [0, 0], errors  # the second replaced the first
    else:
        assert sorted(codes) == [0, 2], errors
        assert errors[codes.index(2)] == (
            f"error: {site.prefix}/pytorch/9.9: pytorch/9.9 is already published; --force replaces it\n"
        )
    assert leftovers(site.prefix) == {}
    assert differences(scan(site.prefix), expected(site, "new", "exchange", "default-written")[0]) == []
    for version in ("1.0", "9.9"):
        check = site.verify(version)
        assert check.returncode == 0 and "restored" not in check.stdout, check.stdout + check.stderr
