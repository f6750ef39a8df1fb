"""The one rule for a value that lands in a file the builder writes.

A value from a user (an option, an argument, an environment variable), a recipe or a site
file reaches a generated file in one of three ways:

- as a **field** of a fixed form (a Slurm account, QoS, partition, time or size, a module's
  name): `field()` checks it against the site's pattern where the site file gives one, else
  against a default character set, and refuses anything else;
- as **quoted text** of the file's language: shell (`values.shell`), Lua and Tcl
  (`values.lua_tcl`), TOML (`values.toml`), a definition (`values.apptainer`); the file's own
  reader gets the value back;
- inside a **comment**: `comment()` escapes every character that would end the comment's
  line (a newline there would start a new line, and in a job script's header a line that
  begins with ``#SBATCH`` is a directive).

`single_line()` refuses a value that must stay on one line and holds a control character.
Every refusal is a RecipeError: one line, exit status 2, the value shown escaped, and it is
raised before anything is written.
"""

import re

from ..errors import RecipeError, one_line, shown

# C0 control characters and DEL: a newline, carriage return or NUL among them
CONTROL = re.compile(r"[\x00-\x1f\x7f]")

# What a Slurm name (account, partition, QoS, reservation) may hold where the site file gives
# no pattern of its own: letters, digits and _ . - @ + (Jean Zay's accounts are abc@v100),
# starting with a letter or digit. No space, quote, comma, = or #: sbatch splits a directive's
# text into words and stops at #, so each of those could add an option or hide one.
SLURM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@+-]*")
SLURM_NAME_EXPECTED = "letters, digits and _ . - @ +, starting with a letter or digit"

# An environment variable's name, as sh reads one in NAME=value; not `_` alone, which the shell
# sets to the last argument of every command, so it would not keep its value
VARIABLE_NAME = re.compile(r"(?!_\Z)[A-Za-z_][A-Za-z0-9_]*")
VARIABLE_EXPECTED = "a variable name: letters, digits and _, not starting with a digit, not _ alone"

# What the value of an sbatch option written into a #SBATCH line may hold, for the reason
# above: no space, quote, backslash, # or control character, except inside one pair of double
# quotes that holds no quote, backslash or control character (--bb="capacity=100G path=/x").
# Wider than a name: a constraint is a100&ib, a gres gpu:a100:4, a hint nomultithread.
_BARE = r"[A-Za-z0-9_.@+:,=&|*%/\[\]()-]"
DIRECTIVE_VALUE = re.compile(rf'{_BARE}*(?:"[^"\\\x00-\x1f\x7f]*"{_BARE}*)?')
DIRECTIVE_EXPECTED = "letters, digits and _ . @ + : , = & | * % / [ ] ( ) -, or text in double quotes"


def single_line(value: str, what: str, where: str = "command line") -> str:
    """``value`` unchanged, or one line that refuses it for holding a control character."""
    if CONTROL.search(str(value)):
        raise RecipeError(
            f"{what} {shown(value)}: expected one line, without control characters "
            f"(newline, carriage return, tab, NUL, DEL)",
            file=where,
        )
    return value


def field(value: str, what: str, pattern=SLURM_NAME, expected=SLURM_NAME_EXPECTED, where="command line") -> str:
    """``value`` unchanged when all of it matches ``pattern``; else one line naming the form."""
    if not re.fullmatch(pattern, str(value)):
        raise RecipeError(f"{what} {shown(value)}: expected {expected}", file=where)
    return value


def directive(option: str, value: str, where: str = "the job's options") -> str:
    """One ``#SBATCH`` line; refused when the option or its value could add or hide another."""
    field(option, "sbatch option", r"[a-z][a-z-]*", "an sbatch option name such as account", where)
    if value:
        field(value, f"--{option}", DIRECTIVE_VALUE, DIRECTIVE_EXPECTED, where)
    return f"#SBATCH --{option}={value}" if value else f"#SBATCH --{option}"


def comment(text) -> str:
    """``text`` for a comment line: every character that would not print as itself (a
    newline, a carriage return, a line separator) escaped, so the comment keeps one line."""
    return one_line(str(text))
