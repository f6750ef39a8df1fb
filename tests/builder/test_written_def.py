"""Property (issue 65): a value from a recipe, a site or a user's Dockerfile that lands in an
Apptainer definition is refused in one line (RecipeError, exit status 2), or the file reads
back, as `apptainer build` reads it (helpers/apptainer_def), with the value where it was put
and nothing else changed:

- each stage keeps its header keys and its sections (no section, stage or header line added);
- apptainer build replaces the same build arguments ({{ NAME }}) as before;
- the header's From/OSVersion is the recipe's image; the %files are as before; each %labels
  entry maps to the value the blocks gave, and the embedded recipe reads back through
  builder.labels.ImageLabels;
- each %environment value, run by bash, is the value given (${NAME} and ${NAME:-default}
  expanded, nothing else); each %help line is a line given; the comments print on one line.

Fields: a target's description, its stages' images, the site image's path, the sites'
environment (names and values), DeepSpeed's skip reasons, the python packages' names and
versions (labels), the network plugin's version, python.mistagged's reasons (in the embedded
recipe); for `hpcml extend` (render_extension), a Dockerfile's LABELs, ENV, COPY paths, RUN
lines, CMD words and WORKDIR, and the Dockerfile's own name.
"""

import json
import re
import shlex
import subprocess
from collections import Counter
from dataclasses import replace
from types import SimpleNamespace

import pytest
from conftest import recipe_tree
from helpers import apptainer_def, awkward_text
from helpers.property_share import examples
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from builder.errors import RecipeError
from builder.labels import ImageLabels
from builder.render import definition, dockerfile
from builder.render.blocks import parts_by_layer
from builder.render.dockerfile import DockerSteps
from builder.values import apptainer, check

TREE = recipe_tree()
TARGETS = ("cpu", "a100-cuda", "lumi-rocm", "lumi-laif", "gh200-cuda")
SETTINGS = settings(
    max_examples=examples(50), deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
# What a definition reads specially, beyond what every writer's tests try (helpers/awkward_text)
DEF_TOKENS = (
    "%post", "\n%post\n", "  %labels", "\xa0%test", "\u2028%help", "Bootstrap: docker", "\nbootstrap:",
    "{{ DEVEL }}", "{{X}}", "${HPCML_SET}", "${HPCML_UNSET:-dflt}", "${", "$(id)", "`id`", "#", "#!", " ", ":", "=",
)  # fmt: skip
# text that holds no control character (so that a writer takes it half the time), and any text
PRINTABLE_TOKENS = tuple(t for t in DEF_TOKENS + awkward_text.TOKENS if not re.search(r"[\x00-\x1f\x7f]", t))
one_line = st.lists(
    st.one_of(st.sampled_from(PRINTABLE_TOKENS), st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=6)),
    max_size=5,
).map("".join)
value = st.one_of(
    one_line,
    awkward_text.text,
    st.lists(st.one_of(st.sampled_from(DEF_TOKENS), awkward_text.text), max_size=5).map("".join),
)
image = st.integers(0, 1).flatmap(lambda n: st.from_regex(apptainer.IMAGE, fullmatch=True) if n else value)


def mostly(plain, other=None):
    """``plain`` (what a writer takes) three times in four, else ``other`` (any text)."""
    return st.integers(0, 3).flatmap(lambda n: plain if n else (other or value))


name = mostly(st.from_regex(check.VARIABLE_NAME, fullmatch=True))
label_name = mostly(st.from_regex(r"[a-z][a-z0-9._-]{0,12}", fullmatch=True))

# the environment %environment runs in here, and the variables bash sets itself (their values vary)
ENV = {"PATH": "/usr/bin:/bin", "HOME": "/home/h", "HPCML_SET": "set-value", "LC_ALL": "C"}
BASH_OWN = set(
    subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", "compgen -v"], env=ENV, capture_output=True, text=True
    ).stdout.split()
) - set(ENV)
# the writer's ${NAME} and ${NAME:-default}, as bash expands them
EXPANSION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([A-Za-z0-9_./:@%+,=-]*))?\}")


# --- the targets, and what a value is put into -----------------------------------------------


def with_sites(target, change):
    sites = tuple(change(site) for site in target.sites)
    return replace(target, sites=sites, site_image=sites[0].site_image if target.site_image else None)


def mutations(target) -> dict:
    """{field: how a drawn value goes into the target} for the fields the target has."""
    found = {
        "description": lambda v: replace(target, description=v),
        "env": lambda pairs: with_sites(target, lambda s: replace(s, env=s.env + tuple(pairs))),
        "deepspeed.skip": lambda v: replace(target, deepspeed=replace(target.deepspeed, skipped=(("an_op", v),))),
        "python.mistagged": lambda v: replace(target, python=replace(target.python, mistagged=(("somepkg", v),))),
        # a lock would refuse a moved pin first: the target without one renders as it asks
        "python.packages": lambda pairs: replace(
            target, python=replace(target.python, packages=tuple(pairs)), python_lock=None
        ),
    }
    if target.site_image:
        found["site_image.path"] = lambda v: with_sites(
            target, lambda s: replace(s, site_image=replace(s.site_image, path=v))
        )
    else:
        for index, stage in enumerate(target.stages):
            found[f"stages.{stage.name}.image"] = lambda v, i=index: replace(
                target, stages=tuple(replace(s, image=v) if n == i else s for n, s in enumerate(target.stages))
            )
    if target.comm.plugin is not None:
        plugin = target.comm.plugin
        found["comm.plugin.version"] = lambda v: replace(
            target, comm=replace(target.comm, plugin=replace(plugin, version=v))
        )
    return found


DRAWN = {
    "env": st.lists(st.tuples(name, mostly(one_line)), min_size=1, max_size=3),
    "python.packages": st.lists(st.tuples(label_name, value), min_size=1, max_size=3),
}


@st.composite
def mutated(draw):
    """(the target's name, the field, the value, the target with the value in the field)"""
    target_name = draw(st.sampled_from(TARGETS))
    fields = mutations(TREE.target(target_name))
    field = draw(st.sampled_from(sorted(fields)))
    drawn = draw(DRAWN.get(field, image if field.endswith(("image", "path")) else value))
    return target_name, field, drawn, fields[field](drawn)


# --- what the files must say ------------------------------------------------------------------


def comments(text) -> list:
    """The comment lines at the top, before the first stage."""
    return [line for line in text[: text.find("\nBootstrap:")].split("\n") if line.startswith("#")]


def final_parts(target) -> list:
    layers = parts_by_layer(target)
    return [part for part in layers["base"] + layers["top"] if part.stage == "final"]


def recipe_images(target) -> dict:
    """{(layer, stage index): the image its header names} for the stages whose image a recipe
    names (None: an empty root that debootstrap --arch fills in %setup, no From)."""
    if target.site_image:
        return {("image", 0): target.site_image.path, ("image", 1): target.site_image.path}
    build, final = target.stage("build"), target.stage("final")
    itself = target.debootstraps_itself
    return {
        ("devel", 0): None if itself and build.bootstrap == "debootstrap" else build.image,
        ("base", 1): None if itself and final.bootstrap == "debootstrap" else final.image,
    }


def run_environment(section, names) -> list:
    """The values of ``names`` after bash runs the %environment section."""
    script = section + "\n" + "".join(f'printf "%s\\0" "${{{n}-}}"\n' for n in names)
    done = subprocess.run(["bash", "--noprofile", "--norc", "-s"], input=script.encode(), env=ENV, capture_output=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.decode(errors="surrogateescape").split("\0")[:-1]


def expected_environment(given) -> dict:
    """Each variable after the exports ``given`` run, as the writer promises: ${NAME} and
    ${NAME:-default} expanded in a value that holds one, everything else as it is."""
    env = dict(ENV)

    def expand(match):
        name, default = match.group(1), match.group(2)
        if name not in env and name in BASH_OWN:  # $RANDOM, $_ and such are bash's own
            assume(False)
        return (env.get(name) or default) if default is not None else env.get(name, "")

    for name, text in ((name, str(val)) for name, val in given):
        env[name] = EXPANSION.sub(expand, text) if re.search(r"\$\{[A-Za-z_]", text) else text
    return env


def assert_environment(section, given):
    want = expected_environment(given)
    names = list(dict.fromkeys(name for name, _ in given))
    assert run_environment(section, names) == [want[name] for name in names]


def check_definition(target, base) -> None:
    """The property for one target's definition files; ``base``: {layer: (stages, build
    arguments replaced)} of the target as the recipes have it."""
    try:
        plans = definition.render_all(target)
    except RecipeError as error:
        assert str(error).isprintable() and error.exit_status == 2, str(error)
        return
    assert list(plans) == list(base)
    images = recipe_images(target)
    for layer, plan in plans.items():
        stages, (before, replaced) = apptainer_def.stages(plan.text), base[layer]
        assert [s.shape() for s in stages] == [s.shape() for s in before], layer
        assert Counter(apptainer_def.substituted(plan.text)) == replaced, layer
        notes = comments(plan.text)
        assert len(notes) == 4 and all(line.isprintable() for line in notes), notes
        for index, (stage, old) in enumerate(zip(stages, before, strict=True)):
            key = "osversion" if stage.header.get("bootstrap") == "debootstrap" else "from"
            assert stage.header.get(key) == images.get((layer, index), old.header.get(key)), (layer, index)
            assert stage.files == old.files
    final = apptainer_def.stages(plans["image"].text)[-1]
    parts = final_parts(target)
    assert final.labels == {key: val for part in parts for key, val in part.labels}
    read = ImageLabels._of(final.labels)
    assert read.recipe == json.loads(json.dumps(target.resolved)) and read.short("target") == target.name
    assert [line for line in final.section("help").split("\n") if line] == [line for p in parts for line in p.help]
    assert_environment(final.section("environment"), [*target.common_env, *(kv for p in parts for kv in p.env)])


BASE = {
    target_name: {
        layer: (apptainer_def.stages(plan.text), Counter(apptainer_def.substituted(plan.text)))
        for layer, plan in definition.render_all(TREE.target(target_name)).items()
    }
    for target_name in TARGETS
}


@SETTINGS
@given(mutated())
@example(
    ("cpu", "description", "one\n%post\nrm -rf /", replace(TREE.target("cpu"), description="one\n%post\nrm -rf /"))
)
def test_a_recipe_value_in_a_definition_is_refused_or_reads_back(case):
    target_name, _field, _value, target = case
    check_definition(target, BASE[target_name])


def test_the_recipes_definitions_read_back_as_their_blocks_say():
    for target_name in TARGETS:
        check_definition(TREE.target(target_name), BASE[target_name])


# --- hpcml extend: a Dockerfile's steps -------------------------------------------------------

EXTEND = TREE.target("cpu")
CONTEXT = "cpu-x.context"


def steps_of(labels=(), env=(), files=(), post=(), cmd=None, workdir=None) -> DockerSteps:
    """Steps as dockerfile.read makes them: ENV assignments as the Dockerfile quotes them
    (here quoted for sh), the CMD as dockerfile._runscript writes it."""
    assignments = tuple(f"{n}={shlex.quote(v)}" for n, v in env)
    recipe = SimpleNamespace(entrypoint=None, cmd=list(cmd) if cmd else None, workdir=workdir)
    runscript = dockerfile._runscript(recipe)
    post = (*(f"export {a}" for a in assignments), *post)
    return DockerSteps(env=assignments, post=post, files=tuple(files), labels=tuple(labels), runscript=runscript)


def run_runscript(section) -> list:
    """The words the %runscript's exec and cd are given, as bash parses the section."""
    script = "cd() { printf 'cd\\0%s\\0' \"$1\"; }\nexec() { printf '%s\\0' \"$@\"; exit 0; }\n" + section
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-s", "ARG"], input=script.encode(), env=ENV, capture_output=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.decode(errors="surrogateescape").split("\0")[:-1]


def check_extension(steps, source, cmd=None, workdir=None) -> None:
    """The property for the one file `hpcml extend` writes; ``cmd`` and ``workdir``: the
    Dockerfile's CMD words and WORKDIR that the steps' runscript is made of."""
    try:
        plan = definition.render_extension(EXTEND, "cpu-x", steps, source, CONTEXT)
    except RecipeError as error:
        assert str(error).isprintable() and error.exit_status == 2, str(error)
        return
    plain = replace(
        steps,
        env=tuple("A=a" for _ in steps.env),
        post=tuple("true" for _ in steps.post),
        files=tuple(("f", "/f") for _ in steps.files),
        labels=tuple((f"l{i}", "v") for i, _ in enumerate(steps.labels)),
        runscript=("true",) if steps.runscript else (),
    )
    stages = apptainer_def.stages(plan.text)
    (twin,) = apptainer_def.stages(definition.render_extension(EXTEND, "cpu-x", plain, "Dockerfile", CONTEXT).text)
    assert len(stages) == 1, [s.shape() for s in stages]
    stage = stages[0]
    assert stage.shape() == twin.shape() and stage.header == twin.header
    assert Counter(apptainer_def.substituted(plan.text)) == Counter(["BASE"])
    notes = comments(plan.text)
    assert len(notes) == 2 and all(line.isprintable() for line in notes), notes
    assert stage.labels == {
        **dict(steps.labels),
        "org.hpc-ml-containers.extended.from": EXTEND.name,
        "org.hpc-ml-containers.extended.steps": source,
    }
    assert stage.files == [(f"{CONTEXT}/{src}", dest) for src, dest in steps.files]
    post = stage.section("post").split("\n")
    lines = [line for step in steps.post for line in step.split("\n")]
    assert any(post[i : i + len(lines)] == lines for i in range(len(post))), "the RUN lines are not there as they are"
    given = {}  # ENV as steps_of quoted it: each reads back as the value
    for assignment in steps.env:
        env_name, _, quoted = assignment.partition("=")
        given[env_name] = shlex.split(quoted)[0]
    assert run_environment(stage.section("environment"), list(given)) == list(given.values())
    if cmd:
        assert run_runscript(stage.section("runscript")) == ["cd", workdir] * bool(workdir) + [*cmd, "ARG"]


@st.composite
def dockerfile_steps(draw):
    """(steps, the Dockerfile's name, its CMD, its WORKDIR)"""
    path = st.from_regex(r"[a-z0-9_./-]{1,12}", fullmatch=True)
    cmd = draw(st.one_of(st.none(), st.lists(value, min_size=1, max_size=3)))
    workdir = draw(st.one_of(st.none(), value))
    steps = steps_of(
        labels=draw(st.lists(st.tuples(label_name, mostly(one_line)), max_size=3)),
        env=draw(st.lists(st.tuples(name, mostly(one_line)), max_size=3)),
        files=draw(st.lists(st.tuples(mostly(path), mostly(path)), max_size=2)),
        post=draw(st.lists(value, max_size=3)),
        cmd=cmd,
        workdir=workdir,
    )
    return steps, draw(mostly(st.just("Dockerfile"))), cmd, workdir


@SETTINGS
@given(dockerfile_steps())
def test_a_dockerfile_value_in_an_extension_is_refused_or_reads_back(case):
    check_extension(*case)


def test_an_env_named_underscore_is_refused():
    """`_` alone is the shell's last argument: `export _=''` never reads back (found by the
    property above, 2026-12-07)."""
    steps = steps_of(labels=[], env=[("_", "")], files=[], post=[], cmd=None, workdir=None)
    with pytest.raises(RecipeError, match=r"^Dockerfile: ENV _: expected a variable name: .*, not _ alone$") as refused:
        definition.render_extension(EXTEND, "cpu-x", steps, "Dockerfile", CONTEXT)
    assert refused.value.exit_status == 2


# --- the property catches a slip of the writer ------------------------------------------------


def test_the_property_catches_a_writer_that_does_not_quote(monkeypatch):
    """With the labels and exports written as they come, fixed values that the writer's
    quoting keeps whole come back as something else."""
    cpu = TREE.target("cpu")
    spaced = with_sites(cpu, lambda s: replace(s, env=s.env + (("SPACED", "a b'c $HOME"),)))
    check_definition(spaced, BASE["cpu"])  # as written: it reads back
    monkeypatch.setattr(apptainer, "export_line", lambda name, val, where: f"export {name}={val}")
    with pytest.raises(AssertionError):
        check_definition(spaced, BASE["cpu"])
    monkeypatch.undo()
    two_lines = replace(cpu, description="cpu\nsecond line")
    check_definition(two_lines, BASE["cpu"])  # as written: refused
    monkeypatch.setattr(apptainer, "line_value", lambda val, what, where: str(val))
    monkeypatch.setattr(apptainer, "label_line", lambda key, val, where: f"{key} {val}")
    with pytest.raises(AssertionError):
        check_definition(two_lines, BASE["cpu"])
