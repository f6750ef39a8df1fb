"""The Makefile's one rule (builder/cli/make_variables.py): the variables on make's command line
are the command's options, read from MAKEFLAGS as make writes it, checked against real make."""

import os
import re
import subprocess

import pytest
from conftest import ROOT

from builder.cli import make_variables, registry
from builder.cli.make_variables import command_line_variables, options

COMMANDS = {command.name: command for command in registry.COMMANDS}


def makeflags(tmp_path, *assignments) -> str:
    """MAKEFLAGS as GNU make hands it to a rule, for these command-line assignments."""
    (tmp_path / "Makefile").write_text('x:\n\t@printf "%s" "$$MAKEFLAGS"\n')
    # a make of its own: under an outer make (make -C DIR unit) the flags it hands down would
    # join these, and its -w would print "Leaving directory" after the rule's output
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    argv = ["make", "-s", "--no-print-directory", "-C", str(tmp_path), "x", *assignments]
    return subprocess.run(argv, capture_output=True, text=True, env=env).stdout


def test_values_come_back_as_typed_through_real_make(tmp_path):
    typed = {"IMAGE_PATH": "${SCRATCH}/a b", "ARGS": "train.py --lr 1e-3", "Q": "it's \\ #", "EMPTY": ""}
    flags = makeflags(tmp_path, *(f"{name}={value}" for name, value in typed.items()))
    assert command_line_variables(flags) == typed
    assert command_line_variables(makeflags(tmp_path)) == {}
    assert command_line_variables(" -j2 --jobserver-auth=3,4 -- NODES=2") == {"NODES": "2"}


def test_each_kind_of_option_has_its_form():
    given = {"NODES": "2", "BIND": "/scratch /projappl", "TASKS_PER_NODE": "4", "ARGS": "x.py", "TARGET": "cpu"}
    assert options(COMMANDS["jobscript"], given) == [
        "--bind=/scratch",
        "--bind=/projappl",
        "--nodes=2",
        "--tasks-per-node=4",
    ]
    assert options(COMMANDS["build"], {"FORCE": "1", "NO_SPACE_CHECK": "yes"}) == ["--force", "--no-space-check"]
    assert options(COMMANDS["build"], {"FORCE": "all"}) == ["--force=all"]
    assert options(COMMANDS["publish"], {"TCL": "1", "DEFAULT": "0", "KEY": "p.pem"}) == ["--key=p.pem", "--tcl"]
    # another command's option is left for it: make smoke builds first
    assert options(COMMANDS["build"], {"SITE": "lumi"}) == []


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"NODSE": "2"}, "NODSE=2 is no option of jobscript; expected ACCOUNT, BIND,"),
        ({"BUILD_FLAGS": "--force"}, "BUILD_FLAGS=--force is no option of jobscript"),
    ],
)
def test_a_name_that_is_no_option_is_one_line_and_exit_2(given, says, capsys):
    with pytest.raises(SystemExit) as stop:
        options(COMMANDS["jobscript"], given)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: make's command line: {says}") and err.count("\n") == 1


def test_a_flag_takes_yes_or_no_only(capsys):
    with pytest.raises(SystemExit):
        options(COMMANDS["publish"], {"TCL": "maybe"})
    assert "TCL=maybe: --tcl is a flag; expected TCL=1 or TCL=0" in capsys.readouterr().err


def test_every_variable_the_makefile_reads_is_its_own_or_an_option():
    """The Makefile names no option: what it reads itself is MAKEFILE_OWN (or its settings)."""
    rules = [line for line in (ROOT / "Makefile").read_text().splitlines() if not line.startswith("#")]
    used = set(re.findall(r"\$\(([A-Z][A-Z0-9_]*)\)", "\n".join(rules)))
    settings = {"PY", "HPCML", "PYTEST", "MAKE"}
    # the one option the Makefile reads itself: `make setup BUNDLE=DIR` (and so `make build
    # BUNDLE=DIR` on a fresh checkout) installs the builder from the bundle, before it exists
    setup_reads = {"BUNDLE"}
    assert used - settings - setup_reads <= make_variables.MAKEFILE_OWN
    assert setup_reads <= set().union(*make_variables.option_actions().values())
    every_option = set().union(*make_variables.option_actions().values())
    assert not make_variables.MAKEFILE_OWN & every_option
