"""Values are quoted in one place; check them with a real POSIX shell."""

import pytest

from builder import runner
from builder.values.shell import cmd, env_value

NASTY = [
    "plain",
    "with space",
    "it's",
    'say "hi"',
    "$(touch /tmp/pwned)",
    "`id`",
    "a;b|c&d",
    "7.0;8.0",
    "*",
    "",
    "-n",
    "tab\there",
    "line\nbreak",
    "back\\slash",
    "$HOME",
    "100%",
]


def sh(script):
    return runner.run(["sh", "-c", script]).stdout


@pytest.mark.parametrize("value", NASTY)
def test_literal_values_survive_the_shell_unchanged(value):
    assert sh(f"X={env_value(value)}; printf '%s' \"$X\"") == value


@pytest.mark.parametrize("value", NASTY)
def test_command_arguments_survive_unchanged(value):
    assert sh(cmd("printf", "%s|", value, "second")) == f"{value}|second|"


def test_values_with_braced_variables_expand_when_the_container_starts():
    value = env_value('/tmp/${USER}-cache $(id) `id` "q" $HOME')
    script = f"USER=ada; X={value}; printf '%s' \"$X\""
    assert sh(script) == '/tmp/ada-cache $(id) `id` "q" $HOME'


def test_unset_variables_leave_no_empty_path_entry():
    value = env_value("/opt/lib${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}")
    assert sh(f"unset LD_LIBRARY_PATH; X={value}; printf '%s' \"$X\"") == "/opt/lib"
    assert sh(f"LD_LIBRARY_PATH=/a; X={value}; printf '%s' \"$X\"") == "/opt/lib:/a"
