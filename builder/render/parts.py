"""What a building block returns: the pieces it adds to one stage, free of Apptainer syntax."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Part:
    block: str
    stage: str                     # "build" or "final"
    packages: tuple = ()           # Debian/Ubuntu packages the os block installs first
    build_env: tuple = ()          # ((name, value), ...) exported in %post before `post`
    files: tuple = ()              # ((host path, image path), ...) for %files, before %post
    post: tuple = ()               # shell commands for %post
    copy_from_build: tuple = ()    # paths copied from the build stage (final stage only)
    env: tuple = ()                # ((name, value), ...) for %environment
    test: tuple = ()               # shell commands for %test
    runscript: tuple = ()          # shell lines for %runscript
    labels: tuple = ()             # ((key, value), ...) for %labels
    help: tuple = ()               # lines for %help
