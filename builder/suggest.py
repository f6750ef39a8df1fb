""" "Did you mean" for names a user types: targets, sites, launch modes."""

import difflib


def did_you_mean(name, choices):
    """`; did you mean 'x'?` for the closest of ``choices`` to ``name``, or '' when none is close."""
    close = difflib.get_close_matches(str(name), sorted(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""
