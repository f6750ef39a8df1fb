"""Fetching a pinned source tree (versions.yaml `sources`) inside a build: exactly its commit.

A helper of the building blocks that compile from source (libfabric, rccl_ofi), not a block
itself: it returns shell lines, never Parts.

Example, in a block's build lines, and the part that holds them names what it fetches:

    'work="$(mktemp -d /tmp/hpcml-plugin-XXXXXX)"',
    *git_sources.checkout(target.comm.plugin, '"$work"/src'), 'cd "$work"/src', "./configure"
    ...
    Part(..., git_sources=git_sources.urls(target.comm.plugin))
"""

from ..values.shell import cmd

# what a build needs to fetch sources this way
PACKAGES = ("ca-certificates", "git")


def checkout(source, dest) -> tuple:
    """Shell lines that fetch ``source`` at its pinned commit into the new folder ``dest``, a
    shell word as written (so that it may name a variable: '"$work"/src').
    git checks every object against its id, so the tree is the one the commit names; the
    last line says so in the log and stops a build that somehow got another."""
    return (
        f"git init -q {dest}",
        f"git -C {dest} fetch -q --depth 1 {cmd(source.git, source.commit)}",
        f"git -C {dest} checkout -q FETCH_HEAD",
        f'test "$(git -C {dest} rev-parse HEAD)" = {source.commit} '
        f"|| {{ echo {cmd(f'{source.name}: not commit {source.commit}')} >&2; exit 1; }}",
        f"echo {cmd(f'{source.name} {source.version} at {source.commit}')}",
        *_submodules(source, dest),
    )


def _submodules(source, dest) -> tuple:
    """The submodules ``source`` needs, from the URLs versions.yaml names (the ones the build
    checks answer) at the commits its own commit records, which git checks as above."""
    if not source.submodules:
        return ()
    paths = [path for path, _ in source.submodules]
    return (
        f"git -C {dest} submodule init -- {cmd(*paths)}",
        *(f"git -C {dest} config {cmd(f'submodule.{path}.url', url)}" for path, url in source.submodules),
        f"git -C {dest} submodule update -q --depth 1 -- {cmd(*paths)}",
    )


def urls(*sources) -> tuple:
    """The git URLs of ``sources``, once each, for Part.git_sources: the build asks each one
    answers before it starts (layerbuild.sources)."""
    return tuple(dict.fromkeys(url for source in sources for url in (source.git, *dict(source.submodules).values())))
