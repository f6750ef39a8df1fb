"""Property (issue 65): every value that reaches a published module's files (module.lua for
Lmod, module.tcl and .version for Environment Modules) is either refused by publish's own
checks (one line, the value shown escaped, before anything is written) or read back unchanged
by the real interpreter of the file's language, with no call the module does not make; no
comment carries raw text (a newline in a value never ends a comment line), and no character
that would not print as itself reaches either file raw.

The values are those publish takes from the user (--name, --version, --prefix), the site file
(its name, description, notes, host MPI, environment), the recipe as the image's labels carry
it, the smoke report, the image's digest and its signer, all through `module_for` as publish
calls it. Readers: tests/helpers/module_readers.py (lupa's Lua 5.4, tkinter's Tcl 8.6)."""

import atexit
import dataclasses
import json
import shutil
import tempfile
from pathlib import Path
from tkinter import TclError
from types import SimpleNamespace

import pytest
from helpers.awkward_text import assert_caught, assert_refused, plain_or, text
from helpers.module_readers import LuaReader, TclReader
from helpers.property_share import examples
from hpcml_facts import SmokeReport
from hypothesis import example, given, settings
from hypothesis import strategies as st
from lupa.lua54 import LuaError

from builder.errors import RecipeError
from builder.publish import install, modulefile
from builder.render.sitefile import GPU_FLAGS
from builder.render.templating import templates
from builder.values.check import CONTROL

LUA, TCL = LuaReader(), TclReader()  # one interpreter of each for the whole module
FOLDER = Path(tempfile.mkdtemp(prefix="hpcml-written-modules-"))
atexit.register(shutil.rmtree, FOLDER, ignore_errors=True)

NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,12}"
small = st.integers(min_value=0, max_value=64)

inputs = st.fixed_dictionaries(
    {
        "name": plain_or(NAME),
        "version": plain_or(NAME),
        "prefix": text,
        "target_name": text,
        "description": text,
        "site_name": text,
        "site_description": text,
        "vendor": st.sampled_from(sorted(GPU_FLAGS)),
        "runtime": text,
        "slurm_mpi": text,
        "mpi_host": text,
        "mpi_abi": text,
        "notes": st.lists(text, max_size=2),
        "site_env": st.lists(st.tuples(text, text), max_size=3),
        "baked_env": st.dictionaries(text, text, max_size=2),
        "torch": text,
        "build_date": text,
        "recipe_sha": text,
        "smoke": st.none() | st.fixed_dictionaries({"created": text, "device": text, "python": text}),
        "nodes": small,
        "digest": text,
        "signer": text,
    }
)
AWKWARD = "a\nb\r\nc ]] ]=] \"q\" 's' $HOME ${X} [exec x] {y} \\ \x00\x1a\x1b\x7f\x85\u2028 -- # \U0001f600\\"
FIXED = {
    "name": "pytorch",
    "version": "2.13.0-cpu",
    "prefix": "appl/ml ]]",
    "target_name": "cpu",
    "description": AWKWARD,
    "site_name": "lumi\r",
    "site_description": AWKWARD,
    "vendor": "amd",
    "runtime": "singularity",
    "slurm_mpi": 'pmi2"',
    "mpi_host": AWKWARD,
    "mpi_abi": "mpich",
    "notes": [AWKWARD, "]]"],
    "site_env": [("NCCL_NET", AWKWARD), ("A\nB", "$x")],
    "baked_env": {"NCCL_NET": "other"},
    "torch": AWKWARD,
    "build_date": "Friday_27_November_2026\n",
    "recipe_sha": "]]",
    "smoke": {"created": AWKWARD, "device": "cpu\n", "python": "3.11]]"},
    "nodes": 2,
    "digest": "0" * 64 + "\n",
    "signer": AWKWARD,
}


def module_of(given):
    """The Module publish makes of these values, or None where its checks refuse one (then
    the refusal is the CLI's one line)."""
    name, version, prefix = given["name"], given["version"], given["prefix"]
    try:
        install._check_names(name, version)
    except RecipeError as error:  # --name is checked first
        assert_refused(error, name if error.message.startswith("--name ") else version)
        return None
    assert not CONTROL.search(name + version), "a name or version with a control character passed"
    try:
        install._check_prefix(prefix)
    except RecipeError as error:
        if CONTROL.search(prefix):
            assert_refused(error, prefix)
            return None
        assert "control character" not in error.message  # refused as no such folder: not this test's
    else:
        assert not CONTROL.search(prefix)
    target = SimpleNamespace(name=given["target_name"], description=given["description"])
    site = SimpleNamespace(
        name=given["site_name"],
        description=given["site_description"],
        env=tuple(given["site_env"]),
        notes=tuple(given["notes"]),
        gpu=SimpleNamespace(vendor=given["vendor"]),
        runtime=SimpleNamespace(command=given["runtime"]),
        mpi=SimpleNamespace(host=given["mpi_host"], abi=given["mpi_abi"], slurm_mpi=given["slurm_mpi"]),
    )
    recipe = {"torch": {"version": given["torch"]}, "environment": given["baked_env"]}
    labels = {
        "recipe": json.dumps(recipe),
        "org.label-schema.build-date": given["build_date"],
        "recipe.sha256": given["recipe_sha"],
    }
    smoke = None
    if given["smoke"] is not None:
        report = {
            "created": given["smoke"]["created"],
            "machine": {"nodes": given["nodes"], "ranks": given["nodes"], "device": given["smoke"]["device"]},
            "versions": {"python": given["smoke"]["python"]},
            "verdict": "pass",
        }
        smoke = SmokeReport.from_json(report, "smoke.json")  # as publish reads smoke.json
    root = Path("/", prefix, name, version)  # as _check_prefix resolves it, had it existed
    module = modulefile.module_for(target, site, name, version, root, labels, smoke, given["digest"], given["signer"])
    # the values themselves reach the module unchanged
    assert (module.name, module.version, module.site) == (name, version, site.name)
    assert module.root == str(root) and module.description == target.description
    assert f"Description: {target.description}" in module.whatis
    shown = [target.description, site.name, site.description, str(root), given["digest"], *site.notes]
    shown += [given["signer"], given["mpi_host"], given["recipe_sha"], target.name, given["torch"]]
    shown += [given["build_date"].replace("_", " ")]  # the build date as its label's words
    shown += [given["mpi_abi"]] if given["mpi_host"] else []
    if smoke is not None:
        shown += [given["smoke"]["created"], given["smoke"]["device"], given["smoke"]["python"]]
    assert all(value in module.help_text for value in shown if value)
    return module


def lua_calls(m) -> list:
    calls = [("help", m.help_text), *(("whatis", line) for line in m.whatis), ("family", m.name)]
    calls += [("setenv", "SING_IMAGE", f"{m.root}/image.sif"), ("setenv", "HPCML_SITE", m.site)]
    calls += [("setenv", "HPCML_MODULE", f"{m.name}/{m.version}")]
    calls += [("append_path", "SING_FLAGS", m.gpu_flag, " ")] if m.gpu_flag else []
    calls += [("setenv", "SLURM_MPI_TYPE", m.slurm_mpi)] if m.slurm_mpi else []
    calls += [("setenv", m.env_prefix + name, value) for name, value in m.container_env]
    return calls + [("prepend_path", "PATH", f"{m.root}/bin")]


def tcl_calls(m) -> list:
    calls = [*(("module-whatis", line) for line in m.whatis), ("conflict", m.name)]
    calls += [("setenv", "SING_IMAGE", f"{m.root}/image.sif"), ("setenv", "HPCML_SITE", m.site)]
    calls += [("setenv", "HPCML_MODULE", f"{m.name}/{m.version}")]
    calls += [("append-path", "-d", " ", "SING_FLAGS", m.gpu_flag)] if m.gpu_flag else []
    calls += [("setenv", "SLURM_MPI_TYPE", m.slurm_mpi)] if m.slurm_mpi else []
    calls += [("setenv", m.env_prefix + name, value) for name, value in m.container_env]
    return calls + [("prepend-path", "PATH", f"{m.root}/bin"), ("puts", "stderr", m.help_text)]


def shape(m):
    """The same module with plain values: the lines its files have, whatever the values."""
    return dataclasses.replace(
        m,
        name="n",
        version="v",
        root="/r",
        site="s",
        description="d",
        help_text="h",
        whatis=tuple("w" for _ in m.whatis),
        gpu_flag=m.gpu_flag and "f",
        slurm_mpi=m.slurm_mpi and "m",
        container_env=tuple(("N", "v") for _ in m.container_env),
        env_prefix="E_",
    )


def check_lua(module):
    written = modulefile.render_lua(module)
    assert all(line.isprintable() for line in written.split("\n")), "a character that does not print, raw"
    # outside the help text, the lines of the template: no value added one (a comment's end)
    help_text = templates.filters["lua_long"]
    lines = written.replace(help_text(module.help_text), "HELP").split("\n")
    assert len(lines) == len(modulefile.render_lua(shape(module)).replace(help_text("h"), "HELP").split("\n"))
    assert lines[0] == f"-- {module.heading}"
    assert LUA.calls(written) == lua_calls(module)


def check_tcl(module):
    written = modulefile.render_tcl(module)
    lines = written.split("\n")
    # Tcl 8.6 has no escape for the planes above the Basic Multilingual Plane (tcl_word)
    assert all(c.isprintable() or ord(c) > 0xFFFF for c in "".join(lines)), "a character that does not print, raw"
    assert len(lines) == len(modulefile.render_tcl(shape(module)).split("\n"))  # no value added a line
    # a comment ending in a backslash would go on over the next line
    assert not any(line.lstrip().startswith("#") and line.endswith("\\") for line in lines)
    assert lines[:2] == ["#%Module1.0", f"## {module.heading}"]
    path = FOLDER / "module.tcl"
    path.write_text(written)
    assert TCL.calls(path) == tcl_calls(module)
    default = FOLDER / ".version"
    default.write_text(modulefile.render_default(module.version))
    assert TCL.calls(default) == [("set", "ModulesVersion", module.version)]


@settings(max_examples=examples(120), deadline=None, database=None)
@given(given=inputs)
@example(given=FIXED)
@example(given={**FIXED, "name": "pytorch\n"})  # `$` in the name's pattern matched before a newline
@example(given={**FIXED, "prefix": "/appl\x00"})  # resolve() stopped on the NUL: a traceback
def test_module_files_give_each_value_back(given):
    module = module_of(given)
    if module is not None:
        check_lua(module)
        check_tcl(module)


# --- the property catches a real slip ----------------------------------------------------------


@pytest.fixture
def slip(monkeypatch):
    """Put ``function`` in place of a template filter, with the compiled templates forgotten."""
    monkeypatch.setattr(templates, "cache", None)

    def put(filter_name, function):
        monkeypatch.setitem(templates.filters, filter_name, function)

    return put


@pytest.mark.parametrize("language, error", [("lua", LuaError), ("lua_long", LuaError), ("tcl", TclError)])
def test_a_naive_quote_is_caught(slip, language, error):
    slip(language, lambda value: f'"{value}"')
    assert_caught(test_module_files_give_each_value_back, AssertionError, error)


def test_raw_text_in_a_comment_is_caught(monkeypatch):
    monkeypatch.setattr(modulefile, "comment", lambda value: value)
    assert_caught(test_module_files_give_each_value_back, AssertionError)
