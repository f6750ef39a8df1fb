"""The options sbatch reads from a batch script, read the way sbatch reads them: a model of
Slurm's src/sbatch/opt.c (`_opt_batch_script`, `_get_argument`), written here for the tests.

- Lines end at a newline only (a carriage return is white space inside a line).
- A line that starts with ``#SBATCH`` (or the old ``#SLURM``) holds options; the first line
  that holds anything but white space before a ``#`` is a command, and reading stops there.
- In a directive's text, words are split at white space; single or double quotes group a word
  and are dropped; a backslash takes the next character as it is; an unquoted ``#`` ends the
  line; a NUL ends the text; an empty word ("") ends the line's options.
"""

MAGIC_WORDS = ("#SBATCH", "#SLURM")


class Unreadable(ValueError):
    """sbatch stops with an error here (an unmatched quote, a leading colon)."""


def options(script: str) -> list[str]:
    """Every word sbatch takes as a command-line option from the script, in order."""
    found = []
    for line in script.split("\n"):
        magic = next((word for word in MAGIC_WORDS if line.startswith(word)), None)
        if magic is None:
            if _is_command(line):
                break
            continue
        found += _words(line[len(magic) :].split("\0", 1)[0])
    return found


def _is_command(line: str) -> bool:
    for char in line:
        if _space(char):
            continue
        return char != "#"
    return False


def _words(text: str) -> list[str]:
    words, at = [], 0
    while True:
        while at < len(text) and _space(text[at]):
            at += 1
        if at == len(text):
            return words
        if text[at] == ":":
            raise Unreadable(f"unexpected ':' in {text!r}")
        word, quote, escaped = [], "", False
        while at < len(text) and (quote or not _space(text[at])):
            char = text[at]
            at += 1
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
                continue
            elif quote:
                if char == quote:
                    quote = ""
                    continue
            elif char in "\"'":
                quote = char
                continue
            elif char == "#":
                at = len(text)  # the rest of the line is a comment
                break
            word.append(char)
        if quote:
            raise Unreadable(f"unmatched {quote} in {text!r}")
        if not word:  # an empty word ("" or a comment) ends the line's options
            return words
        words.append("".join(word))


def _space(char: str) -> bool:
    # C's isspace in the C locale: space, \t, \n, \v, \f, \r
    return char in " \t\n\v\f\r"
