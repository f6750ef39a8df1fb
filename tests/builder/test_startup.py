"""Start-up imports only what the command uses (issue 48): jsonschema's format checkers pulled
in rfc3987_syntax, whose import compiles three Earley grammars (0.7 s for every command), and
jsonschema itself is needed only for recipes that have not passed before. Checked by the
modules imported, not by a time."""

import os
import subprocess
import sys

from conftest import ROOT

# never needed to start a command; rfc3987_syntax and rfc3986_validator only for an iri or
# uri format check (the SBOM's)
HEAVY = {"rfc3987_syntax", "lark", "rfc3986_validator"}


def python(*args, cache=None):
    """A fresh interpreter in the checkout, as run_builder starts the CLI."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if cache:
        env["XDG_CACHE_HOME"] = str(cache)
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def imported(*args, cache=None):
    """What `python -X importtime -m builder ARGS` imports, or tries to."""
    result = python("-X", "importtime", "-m", "builder", *args, cache=cache)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = [line.split("|") for line in result.stderr.splitlines() if line.startswith("import time:")]
    modules = {row[-1].strip() for row in rows if len(row) == 3}
    assert "builder.cli" in modules  # the listing is real
    return modules


# what only a download or an unpacked archive needs (the toolbox's kit, the index checks)
NETWORK = {"ssl", "urllib.request", "tarfile"}


def test_help_imports_neither_jsonschema_nor_jinja2():
    assert not (HEAVY | NETWORK | {"jsonschema", "jinja2"}) & imported("--help")


def test_recipes_that_passed_are_not_validated_again(tmp_path):
    """jsonschema only where the recipes have not passed before (schema_passes), jinja2 only
    where the command renders a template."""
    first = imported("show", "cpu", cache=tmp_path)
    assert "jsonschema" in first and not (HEAVY | NETWORK | {"jinja2"}) & first
    again = imported("show", "cpu", cache=tmp_path)
    assert not (HEAVY | NETWORK | {"jsonschema", "jinja2"}) & again


def test_iri_and_uri_format_checks_still_work_after_the_recipes_validate():
    """The stand-ins leave jsonschema's iri and uri checkers in place; the first check of each
    imports the real module."""
    code = (
        "import sys\n"
        "from builder.recipes import validate\n"
        "checker = validate.jsonschema_lazily().Draft7Validator.FORMAT_CHECKER\n"
        "assert not {'rfc3987_syntax', 'rfc3986_validator'} & set(sys.modules)\n"
        "print(checker.conforms('http://a b', 'iri-reference'), checker.conforms('https://ä.example/x', 'iri'))\n"
        "print(checker.conforms('http://a b', 'uri'), checker.conforms('https://example.org/x', 'uri'))\n"
        "print(all(sys.modules[name].__file__ for name in ('rfc3987_syntax', 'rfc3986_validator')))\n"
    )
    result = python("-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "True", "False", "True", "True"]


def test_importing_the_sbom_writer_compiles_no_grammar():
    """builder.sbom.document imports cyclonedx's validator on its first SBOM: every test
    worker imports the module while collecting, and paid 2 s for rfc3987_syntax's grammars."""
    code = "import sys\nimport builder.sbom.document\nprint(sorted({'jsonschema', 'lark'} & set(sys.modules)))\n"
    result = python("-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["[]"]
