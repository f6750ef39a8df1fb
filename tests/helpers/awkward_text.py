"""Text that a quoting slip breaks, for the property tests of the writers
(tests/builder/test_written_*.py, issue 65), and what a refusal of it must look like."""

from hypothesis import strategies as st

from builder.errors import RecipeError, shown

# What each file's language reads specially, and what a comment or a line must not hold raw:
# quotes, backslashes, $ and brackets (shell, Lua, Tcl, TOML), Lua's long-string closers, a
# newline, a carriage return, NUL, ^Z (Tcl's `source` stops there), ESC, DEL, C1's NEL, a line
# separator, a format character (not printable) and characters above the Basic Multilingual Plane.
TOKENS = (
    '"', "'", "\\", "$", "${HOME}", "$$", "[", "]", "{", "}", "[[", "]]", "]=]", "--", "#", ";", "=", " ",
    "\n", "\r", "\r\n", "\t", "\x00", "\x1a", "\x1b", "\x7f", "\x85", "\u2028", "\u0600", "\U0001f600", "\U000e0001",
)  # fmt: skip

# Characters UTF-8 can write: hypothesis also draws lone surrogates, which no value the writers
# get can hold (YAML refuses them, and a command line's bytes that are not UTF-8 come as the
# surrogates that write back as those bytes: test_cli's cases). Drawn, they failed a module
# file's Lua one run in twenty (seed 8, 2026-12-02).
CHARACTERS = st.characters(codec="utf-8")
awkward = st.lists(st.one_of(st.sampled_from(TOKENS), CHARACTERS), max_size=8).map("".join)
# any text: hypothesis's own, or one built of the characters above
text = st.one_of(awkward, st.text(CHARACTERS, max_size=12))


def plain_or(pattern: str):
    """Text that a field's check takes (``pattern``) two times in three, any text the third:
    the writer sees most examples, the check the rest."""
    plain = st.from_regex(pattern, fullmatch=True)
    return st.one_of(plain, plain, text)


def assert_refused(error: RecipeError, value) -> None:
    """A refusal as the CLI prints it: one line, the value shown escaped."""
    message = str(error)
    assert message.isprintable(), message  # no newline, carriage return or other control character
    assert shown(value) in message or repr(str(value)) in message, message


def assert_caught(prop, *kinds) -> None:
    """The property test ``prop`` fails (on its explicit examples first, so at once), each
    failing example with an error of ``kinds``: hypothesis raises the one, or a group of them."""
    try:
        prop()
    except ExceptionGroup as group:
        assert all(isinstance(error, kinds) for error in group.exceptions), group.exceptions
    except kinds:
        pass
    else:
        raise AssertionError(f"{prop.__name__} passed: the property does not catch the slip")
