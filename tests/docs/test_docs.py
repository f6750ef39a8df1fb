"""Every command the documentation shows runs as shown (issue 30).

The fenced blocks of README.md, CONTRIBUTING.md and docs/*.md follow one convention
(docs/testing.md, "The documentation convention"):

    ```sh                 runs on a fresh checkout after `make setup`: no image, no cluster,
                          no root-only state, nothing written outside the checkout
    ```sh needs-image     needs a built image (images/<target>.sif)
    ```sh needs-cluster   needs a Slurm cluster (sbatch, srun; `make two-nodes` gives one)
    ```sh site            a real HPC site (LUMI, Jean Zay, ...)
    ```sh admin           builds, publishes, installs, or needs root
    ```text               output, not commands (also yaml, json, lua: file contents)

Each command of an `sh` fence (a line, with the lines a trailing backslash continues; blank
and comment lines left out) is one test case, id FILE:LINE. It runs with bash in a copy of the
checkout (the files `git ls-files` lists, tracked or not yet added, not ignored), whose .venv
is the repository's (linked), with .venv/bin first on PATH and a bounded time, and must exit 0.
The commands of one fence run in order in one copy, so a later line can read what an earlier
one wrote (`make jobscript ... > job.sh`, then `bash -n job.sh`); each fence gets its own copy.

Also: README.md stays a front page (at most 250 lines) with a table of contents whose links
all lead to files that exist, and every docs/*.md is linked from it. Each docs page stays short
enough to read (at most 450 lines, docs/performance.md 250: a table of current figures), and no
page names a commit of this repository: the history is git's (issue 68).
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNABLE = "sh"
NOT_RUN = ("needs-image", "needs-cluster", "site", "admin")
# info strings a fence may carry; a shell fence that is not `sh` would escape the convention
KNOWN_LANGUAGES = ("sh", "text", "yaml", "json", "lua", "python", "tcl")
TIMEOUT = 180  # seconds per command; `hpcml check` takes about one
README_MAX_LINES = 250
PAGE_MAX_LINES = 450  # a docs/*.md page; split by task beyond it (issue 68)
PERFORMANCE_MAX_LINES = 250  # docs/performance.md: the current figures, not their history
# pages still over PAGE_MAX_LINES; the set may only shrink (a page that fits must leave it)
STILL_LONG = set()
# pages that still name commits of this repository; the set may only shrink, as above
STILL_NAME_COMMITS = set()
# a user's environment must not change what a documented command does
CLEARED_PREFIXES = ("HPCML_", "SING_", "SLURM_", "APPTAINER", "SINGULARITY", "MAKE", "MFLAGS")

_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*(.*)$")


def fences(path: Path):
    """(info words, line of the opening fence, [(line number, text), ...]) per fenced block."""
    found, opened = [], None
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if opened is None:
            match = _OPEN.match(line)
            if match:
                opened = (match.group(1), match.group(2).split(), number, [])
        else:
            marker, info, start, body = opened
            stripped = line.strip()
            if stripped.startswith(marker[0] * len(marker)) and not stripped.strip(marker[0]):
                found.append((info, start, body))
                opened = None
            else:
                body.append((number, line))
    assert opened is None, f"{path.name}:{opened[2]}: a fence that is never closed"
    return found


def commands(body):
    """(line number, command) for each command: continuation lines joined, comments left out."""
    out, pending, first = [], [], None
    for number, line in body:
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if not pending:
            first = number
        if line.rstrip().endswith("\\"):
            pending.append(line.rstrip()[:-1])
            continue
        pending.append(line)
        out.append((first, " ".join(part.strip() for part in pending)))
        pending = []
    assert not pending, f"line {first}: a command ends in a backslash with nothing after it"
    return out


def _relative(path):
    return str(path.relative_to(ROOT))


def runnable():
    """One pytest param per command of every `sh` fence: (fence key, index, command)."""
    params = []
    for path in DOCS:
        for info, start, body in fences(path):
            if info[:1] != [RUNNABLE] or len(info) > 1:
                continue
            for index, (line, command) in enumerate(commands(body)):
                params.append(pytest.param((_relative(path), start), index, command, id=f"{_relative(path)}:{line}"))
    return params


RUNNABLE_COMMANDS = runnable()


# ---- the checkout the commands run in ---------------------------------------------------------


def _checkout_files():
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return sorted({name for name in listed.split("\0") if name})


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """The checkout's files, times kept, and a .venv of links to the repository's own.

    The .venv is a folder of links with a fresh `.installed`, not one link to the real .venv:
    make must see the set-up as done, or `make setup` in the copy would reinstall the real
    venv editable from the copy, which the test then deletes."""
    venv = ROOT / ".venv"
    if not (venv / "bin" / "python").exists():
        pytest.fail("no .venv in the repository; run `make setup` first")
    root = tmp_path_factory.mktemp("docs") / "checkout"
    for name in _checkout_files():
        source = ROOT / name
        if not source.is_file():  # listed, but deleted in the working tree
            continue
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)
    (root / ".venv").mkdir()
    for entry in venv.iterdir():
        if entry.name != ".installed":
            (root / ".venv" / entry.name).symlink_to(entry)
    (root / ".venv" / ".installed").touch()
    return root


@pytest.fixture(scope="module")
def fence_folders(pristine):
    """fence key -> [its copy of the checkout, the index of the next command to run in it]."""
    return {}


def _environment(folder):
    env = {name: value for name, value in os.environ.items() if not name.startswith(CLEARED_PREFIXES)}
    env["PATH"] = f"{folder / '.venv' / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
    env["VIRTUAL_ENV"] = str(folder / ".venv")
    env.pop("PYTHONPATH", None)
    return env


def _run(command, folder):
    try:
        return subprocess.run(
            ["bash", "-c", command],
            cwd=folder,
            env=_environment(folder),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"`{command}` did not finish within {TIMEOUT} s")


def _shown(result):
    return (
        f"exit status {result.returncode}\n--- stdout (end)\n{result.stdout[-3000:]}"
        f"\n--- stderr (end)\n{result.stderr[-3000:]}"
    )


@pytest.mark.parametrize("fence, index, command", RUNNABLE_COMMANDS)
def test_command_runs_as_shown(fence, index, command, pristine, fence_folders, tmp_path_factory):
    if fence not in fence_folders:
        folder = tmp_path_factory.mktemp("fence") / "checkout"
        shutil.copytree(pristine, folder, symlinks=True)
        fence_folders[fence] = [folder, 0]
    folder, next_index = fence_folders[fence]
    if next_index < index:
        # this case was selected alone: the fence's earlier commands set up what it reads
        path = ROOT / fence[0]
        earlier = commands(next(body for _, start, body in fences(path) if start == fence[1]))
        for line, before in earlier[next_index:index]:
            result = _run(before, folder)
            assert result.returncode == 0, f"{fence[0]}:{line}: `{before}` (run first)\n{_shown(result)}"
    fence_folders[fence][1] = index + 1
    result = _run(command, folder)
    assert result.returncode == 0, f"`{command}`\n{_shown(result)}"


# ---- the shape of the documentation -----------------------------------------------------------


def test_there_are_runnable_commands():
    assert len(RUNNABLE_COMMANDS) >= 30, "the docs should show commands a reader can run here"


@pytest.mark.parametrize("path", DOCS, ids=_relative)
def test_fences_follow_the_convention(path):
    problems = []
    for info, start, body in fences(path):
        where = f"{_relative(path)}:{start}"
        if not info:
            problems.append(f"{where}: a fence without an info string (sh, sh TAG, text, yaml ...)")
        elif info[0] not in KNOWN_LANGUAGES:
            problems.append(f"{where}: info string {info[0]!r}; expected one of {KNOWN_LANGUAGES}")
        elif info[0] == RUNNABLE and len(info) > 1 and (len(info) > 2 or info[1] not in NOT_RUN):
            problems.append(f"{where}: `sh {' '.join(info[1:])}`; expected `sh` or sh with one of {NOT_RUN}")
        elif info[0] == RUNNABLE:
            commands(body)  # a dangling backslash fails here
    assert not problems, "\n".join(problems)


def test_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; at most {README_MAX_LINES}"


_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_FENCED = re.compile(r"^ {0,3}(`{3,}|~{3,}).*?^ {0,3}\1\s*$", re.M | re.S)


def _prose(path):
    """A Markdown file's text without its fenced blocks."""
    return _FENCED.sub("", path.read_text())


def _targets(text):
    """Relative link targets (FILE, ANCHOR) in Markdown text; URLs left out."""
    found = []
    for link in _LINK.findall(text):
        if re.match(r"^[a-z]+:", link):
            continue
        file, _, anchor = link.partition("#")
        found.append((file, anchor))
    return found


def _anchors(path):
    """The anchors GitHub gives a Markdown file's headings."""
    anchors, seen = set(), {}
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", _prose(path), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchors.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


def test_readme_has_a_table_of_contents():
    text = (ROOT / "README.md").read_text()
    assert re.search(r"^## Contents\s*$", text, re.M), "README.md has no '## Contents' section"
    contents = text.split("\n## Contents", 1)[1].split("\n## ", 1)[0]
    assert _targets(contents), "the Contents section links nowhere"


@pytest.mark.parametrize("path", DOCS, ids=_relative)
def test_links_lead_to_files_and_headings_that_exist(path):
    broken = []
    for file, anchor in _targets(_prose(path)):
        target = (path.parent / file) if file else path
        if not target.exists():
            broken.append(f"{file} (no such file)")
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
            broken.append(f"{file}#{anchor} (no such heading)")
    assert not broken, f"{_relative(path)} has broken links: {broken}"


def test_every_doc_is_linked_from_the_readme():
    linked = {(ROOT / file).resolve() for file, _ in _targets(_prose(ROOT / "README.md")) if file}
    unlinked = [_relative(path) for path in DOCS[1:] if path.resolve() not in linked]
    assert not unlinked, f"README.md does not link to {unlinked}"
    assert (ROOT / "docs" / "performance.md").resolve() in linked, "README.md must link docs/performance.md"


PAGES = DOCS[2:]  # docs/*.md


@pytest.mark.parametrize("path", PAGES, ids=_relative)
def test_a_page_stays_short(path):
    count = len(path.read_text().splitlines())
    limit = PERFORMANCE_MAX_LINES if path.name == "performance.md" else PAGE_MAX_LINES
    if path.name in STILL_LONG:
        assert count > limit, f"{_relative(path)} has {count} lines, at most {limit}: take it out of STILL_LONG"
    else:
        assert count <= limit, f"{_relative(path)} has {count} lines; at most {limit} (split it by task)"


def test_still_long_names_pages_that_exist():
    assert STILL_LONG | STILL_NAME_COMMITS <= {path.name for path in PAGES}


_HEX_WORD = re.compile(r"\b[0-9a-f]{7,40}\b")


def _is_commit(word):
    """Whether WORD names a commit of this repository (a digest or a number does not)."""
    return (
        subprocess.run(
            ["git", "rev-parse", "--verify", "-q", f"{word}^{{commit}}"],
            cwd=ROOT,
            capture_output=True,
            timeout=60,
        ).returncode
        == 0
    )


@pytest.mark.parametrize("path", [ROOT / "README.md", *PAGES], ids=_relative)
def test_no_page_names_a_commit(path):
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no commits to look up")
    commits = sorted({word for word in _HEX_WORD.findall(path.read_text()) if _is_commit(word)})
    if path.name in STILL_NAME_COMMITS:
        assert commits, f"{_relative(path)} names no commit now: take it out of STILL_NAME_COMMITS"
    else:
        assert not commits, f"{_relative(path)} names commits {commits}; say when (a date), not which commit"


BLOCKS = ROOT / "builder" / "render" / "blocks"
# the pages that map the modules: builder/ in design.md, runtime/ in runtime.md
MODULE_PAGES = {"builder": ROOT / "docs" / "design.md", "runtime": ROOT / "docs" / "runtime.md"}


def test_design_names_every_module():
    """docs/design.md's layout lists every module of builder/ by file name, docs/runtime.md
    every module of runtime/ by path."""
    missing = []
    for top, page in MODULE_PAGES.items():
        text = page.read_text()
        for path in sorted((ROOT / top).rglob("*.py")):
            if "_data" in path.parts or "__pycache__" in path.parts:
                continue
            relative = path.relative_to(ROOT / top)
            if top == "builder" and path.name == "__init__.py":
                continue  # a package's __init__ holds no code of its own
            if path.parent == BLOCKS:
                continue  # listed in docs/blocks.md, generated from their docstrings (below)
            shown = path.name if top == "builder" else str(relative)
            if f"`{shown}`" not in text:
                missing.append(f"{_relative(page)} does not name {path.relative_to(ROOT)}")
    assert not missing, "\n".join(missing)


def _block_name(path):
    found = re.search(r'^BLOCK = "(\w+)"', path.read_text(), re.M)
    return found.group(1) if found else path.stem


def test_blocks_md_names_every_block():
    text = (ROOT / "docs" / "blocks.md").read_text()
    # a module's block is named by its BLOCK where it has one (os_packages.py emits `os`)
    blocks = {_block_name(path) for path in BLOCKS.glob("*.py")} - {"__init__"}
    assert blocks and not {name for name in blocks if f"## `{name}`" not in text}


def test_make_jobscript_prints_only_the_script(pristine, tmp_path):
    """`make jobscript ... > job.sh`, as the docs show it, gives a script and nothing else."""
    folder = tmp_path / "checkout"
    shutil.copytree(pristine, folder, symlinks=True)
    result = _run('make jobscript TARGET=cpu ARGS="examples/ddp_cnn.py" > job.sh', folder)
    assert result.returncode == 0, _shown(result)
    script = (folder / "job.sh").read_text()
    assert script.startswith("#!/bin/bash\n"), f"job.sh begins with make's output:\n{script[:500]}"
