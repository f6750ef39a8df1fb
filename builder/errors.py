"""The two kinds of failure the CLI reports, each with its own exit status."""


class BuilderError(Exception):
    exit_status = 1


class RecipeError(BuilderError):
    """Bad input from the user: a recipe file or a command-line value.

    Printed as one line: ``FILE:LINE: KEY.PATH: what was expected, what was found``.
    """

    exit_status = 2

    def __init__(self, message, *, file=None, line=None, path=()):
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line
        self.path = tuple(path)

    def __str__(self):
        where = ""
        if self.file:
            where = f"{self.file}:{self.line}: " if self.line else f"{self.file}: "
        keys = ".".join(str(p) for p in self.path)
        return f"{where}{keys + ': ' if keys else ''}{self.message}"


class SetupError(BuilderError):
    """The user's set-up lacks what a command needs (a package of the interpreter, a way to run
    Apptainer on this host): told in one line like bad input."""

    exit_status = 2


class ToolError(BuilderError):
    """An outside program failed or is missing."""

    exit_status = 1


class CheckFailed(BuilderError):
    """A check found a problem in the tree (for example stale rendered files)."""

    exit_status = 1
