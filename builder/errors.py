"""The failures the CLI reports, each kind with its exit status: 2 for what the user can fix
(RecipeError, SetupError), 1 for a failed outside tool or check (ToolError, CheckFailed); and
how a message speaks: `shown()` quotes a value so that it stays on one line, `did_you_mean()`
names the closest of the names a user could have meant (targets, sites, launch modes)."""

import difflib
import re

_PLAIN = re.compile(r"[A-Za-z0-9_.,:/@+=%-]+")


def shown(value) -> str:
    """``value`` for a message, on one line: as it is when plain, else Python's quoted form,
    which escapes every character that would not print as itself (a newline as \\n)."""
    text = str(value)
    return text if _PLAIN.fullmatch(text) else repr(text)


def did_you_mean(name, choices) -> str:
    """`; did you mean 'x'?` for the closest of ``choices`` to ``name``, or '' when none is close."""
    close = difflib.get_close_matches(str(name), sorted(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def one_line(text: str) -> str:
    """``text`` with each character that would not print as itself escaped: a control
    character (newline, carriage return, NUL, DEL, C1) or a line separator would end or hide
    part of the line."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


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
        # one line, whatever value a message quotes raw: a newline could print a directive
        return one_line(f"{where}{keys + ': ' if keys else ''}{self.message}")


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
