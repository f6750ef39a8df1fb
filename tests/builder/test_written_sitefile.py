"""Property (issue 65): a site's values in its wrapper settings file (wrappers/sites/<site>.sh,
render/sitefile.py) are refused in one line (RecipeError, exit status 2), or the wrapper's own
reading of the file, bash's `. "$site_file"` under `set -euo pipefail`, gives each variable
back as the value written, each array item by item, sets nothing else, and the comments print
on one line. $HPCML_SITE_FACTS reads back as the site's facts (hpcml_facts.SiteFacts).

Fields, drawn together into one file and read by one bash: the site's name and description,
runtime.path and .module, binds, scratch.tmpdir and .node_local, the env variables that
scratch.make_dirs names, multi_node.binds, .env and .library_path, network.transport and
.provider (in the facts).
"""

import json
import subprocess
import tempfile
from dataclasses import replace

import pytest
from conftest import recipe_tree
from helpers import awkward_text
from helpers.property_share import examples
from hpcml_facts import SiteFacts
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from builder.errors import RecipeError
from builder.render import sitefile

TREE = recipe_tree()
SITES = ("lumi", "jean-zay", "local")
ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}
printable = st.lists(
    st.one_of(
        st.sampled_from([t for t in awkward_text.TOKENS if t.isprintable()]),
        st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=6),
    ),
    max_size=5,
).map("".join)


def mostly(plain):
    """``plain`` (text a site file takes: no control character) three times in four, else any text."""
    return st.integers(0, 3).flatmap(lambda n: plain if n else awkward_text.text)


value = mostly(printable)
values = st.lists(value, max_size=3).map(tuple)
variable = mostly(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]*", fullmatch=True))


@st.composite
def sites(draw):
    site = TREE.sites[draw(st.sampled_from(SITES))]
    dirs = draw(st.lists(st.tuples(st.from_regex(r"[A-Z][A-Z0-9_]{0,8}", fullmatch=True), value), max_size=2))
    dirs = list(dict(dirs).items())
    return replace(
        site,
        name=draw(st.one_of(st.just(site.name), value)),
        description=draw(value),
        runtime=replace(site.runtime, path=draw(value), module=draw(value)),
        binds=draw(values),
        env=site.env + tuple(dirs),
        scratch=replace(site.scratch, tmpdir=draw(value), node_local=draw(value), make_dirs=tuple(n for n, _ in dirs)),
        multi_node=replace(
            site.multi_node,
            binds=draw(values),
            env=tuple(draw(st.lists(st.tuples(variable, value), max_size=3))),
            library_path=draw(values),
        ),
        network=replace(site.network, transport=draw(value), provider=draw(value)),
    )


def read_as_the_wrapper_does(text) -> tuple:
    """({name: value, or [items] for an array} of the file's variables, the names sourcing it
    set that were not set before), as bash reads the file."""
    arrays = [line.name for line in sitefile.SITE_FILE if isinstance(line.value(TREE.sites["lumi"]), tuple)]
    scalars = [line.name for line in sitefile.SITE_FILE if line.name not in arrays]
    script = "\n".join(
        [
            "set -euo pipefail",
            'before_="$(compgen -v)"',
            '. "$1"',
            'after_="$(compgen -v)"',
            'printf "%s\\0" "$before_" "$after_"',
            *(f'printf "%s\\0" "${name}"' for name in scalars),
            *(f'printf "%s\\0" "${{#{name}[@]}}" "${{{name}[@]}}"' for name in arrays),
        ]
    )
    with tempfile.NamedTemporaryFile("wb", suffix=".sh") as handle:
        handle.write(text.encode())
        handle.flush()
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-c", script, "bash", handle.name], env=ENV, capture_output=True
        )
    assert done.returncode == 0, done.stderr
    fields = done.stdout.decode(errors="surrogateescape").split("\0")[:-1]
    before, after, rest = set(fields[0].split("\n")), set(fields[1].split("\n")), fields[2:]
    read = dict(zip(scalars, rest, strict=False))
    rest = rest[len(scalars) :]
    for name in arrays:
        count, rest = int(rest[0]), rest[1:]
        read[name], rest = rest[:count], rest[count:]
    assert not rest
    return read, after - before - {"before_"}


def check_site_file(site) -> None:
    try:
        text = sitefile.render_site(site)
    except RecipeError as error:
        assert str(error).isprintable() and error.exit_status == 2, str(error)
        return
    lines = text.split("\n")
    notes = [line for line in lines if line.startswith("#")]
    assert all(line.isprintable() for line in notes), notes
    assert len(lines) == 1 + 3 + sum(bool(line.note) for line in sitefile.SITE_FILE) + len(sitefile.SITE_FILE)
    read, new = read_as_the_wrapper_does(text)
    assert new == {line.name for line in sitefile.SITE_FILE}
    for line in sitefile.SITE_FILE:
        written = line.value(site)
        assert read[line.name] == ([str(item) for item in written] if isinstance(written, tuple) else str(written))
    facts = json.loads(read["HPCML_SITE_FACTS"])
    assert SiteFacts.from_json(facts, "HPCML_SITE_FACTS").to_json() == site.smoke_facts.to_json()


@settings(max_examples=examples(40), deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(sites())
@example(replace(TREE.sites["lumi"], description="LUMI\nrm -rf ~"))
def test_a_site_value_in_the_wrappers_settings_is_refused_or_read_back_by_bash(site):
    check_site_file(site)


def test_the_sites_files_read_back_as_written():
    for name in sorted(TREE.sites):
        check_site_file(TREE.sites[name])


def test_the_property_catches_a_writer_that_does_not_quote(monkeypatch):
    spaced = replace(TREE.sites["lumi"], binds=("/scratch/my project", "$HOME/x'y"))
    check_site_file(spaced)  # as written: each bind reads back whole
    monkeypatch.setattr(sitefile, "quote", str)
    with pytest.raises(AssertionError):
        check_site_file(spaced)


def test_a_declared_fact_reads_as_bash_reads_it_and_empty_under_a_section_left_out():
    from types import SimpleNamespace

    site = SimpleNamespace(runtime=SimpleNamespace(requires_job=True, path="/usr/bin/x"), site_image=None)
    assert sitefile._fact(("runtime", "requires_job"))(site) == 1
    assert sitefile._fact(("runtime", "path"))(site) == "/usr/bin/x"
    assert sitefile._fact(("site_image", "venv"))(site) == ""
