"""What a building block returns: the pieces it adds to one stage, free of Apptainer syntax."""

from dataclasses import dataclass

from .. import contract
from ..values.shell import cmd

# `python -m builder build` binds a folder of the build host here for %post only (settings,
# local wheels, kept outputs); a plain `apptainer build` has nothing there and just builds.
HOST_MOUNT = "/mnt"
KEPT_DIR = "kept"  # one folder per kept step and inputs, under the mount
KEPT_MOUNT = f"{HOST_MOUNT}/{KEPT_DIR}"
HOST_SETTINGS = f"{HOST_MOUNT}/hpcml-build-host.sh"  # CA bundle and pip settings, sourced by %post
# `hpcml extend --pyenv`: a project env's files as a tar in the layer's context (Apptainer's
# %files follows links, and the env's python links into the image), unpacked by its %post
PYENV_TAR = "pyenv.tar"
# x86-64 compilers for an image of another arch, bound by a build on an x86-64 host
CROSS_DIR = "cross"
CROSS_MOUNT = f"{HOST_MOUNT}/{CROSS_DIR}"
# A kept step's output lists its files with their sha256 (sha256sum's lines, names relative to
# the folder), written after its save commands and checked before its restore commands: a
# cached output that changed since (a bad copy, a file replaced) stops the build instead of
# going into the image. The step's folder name covers these lines too, so an output kept
# before them, which has no list, is never looked for: that step runs again.
KEPT_SUMS = "SHA256SUMS"
SAVE_SUMS = f'(cd "$kept" && find . -type f ! -path ./{cmd(KEPT_SUMS)} -exec sha256sum {{}} + > {cmd(KEPT_SUMS)})'
CHECK_SUMS = (
    f'if ! sums="$(cd "$kept" && sha256sum --check --quiet {cmd(KEPT_SUMS)} 2>&1)"; then '
    f'echo "{contract.FAILURE_MARKER}the kept output ${{kept##*/}} is not what its step saved '
    "($(printf '%s' \"$sums\" | tr '\\n' ' ')); remove that folder from kept/ in the builder's cache "
    '(~/.cache/hpc-ml-containers, or under XDG_CACHE_HOME) and build again" >&2; exit 1; fi'
)


@dataclass(frozen=True)
class Kept:
    """A slow step whose output the builder keeps between builds and puts back when the step's
    inputs are the same: its own lines, the OS packages of its stage and the layer it starts
    from (see render.definition). Example, a plugin compiled into /opt/plugin:

        Kept(name="plugin", build=("make -C /src install PREFIX=/opt/plugin",),
             save=('cp -a /opt/plugin "$kept/"',), restore=('cp -a "$kept/plugin" /opt/',))

    ``save`` and ``restore`` find the folder in the shell variable ``kept``. The definition
    runs ``saved()`` and ``restored()``: those with the sha256 list of what was saved."""

    name: str  # names the folder; the inputs' hash is appended
    build: tuple  # shell commands that make the output
    save: tuple  # ... that copy it into "$kept" (after build)
    restore: tuple  # ... that put it back from "$kept" (instead of build)

    def saved(self) -> tuple:
        return (*self.save, SAVE_SUMS)

    def restored(self) -> tuple:
        return (CHECK_SUMS, *self.restore)


@dataclass(frozen=True)
class Part:
    block: str
    stage: str  # "build" or "final"
    packages: tuple = ()  # Debian/Ubuntu packages the os block installs first
    build_env: tuple = ()  # ((name, value), ...) exported in %post before `post`
    files: tuple = ()  # ((host path, image path), ...) for %files, before %post
    kept: Kept | None = None  # a step kept between builds, rendered before `post`
    post: tuple = ()  # shell commands for %post
    copy_from_build: tuple = ()  # paths copied from the build stage (final stage only)
    env: tuple = ()  # ((name, value), ...) for %environment
    test: tuple = ()  # shell commands for %test
    runscript: tuple = ()  # shell lines for %runscript
    labels: tuple = ()  # ((key, value), ...) for %labels
    help: tuple = ()  # lines for %help
    build_args: tuple = ()  # names of the build arguments its lines use (build_arg)
    pip_indexes: tuple = ()  # web indexes its pip lines name (the build checks each answers)
    git_sources: tuple = ()  # https git URLs its lines fetch (git_sources.urls; the build asks each)
