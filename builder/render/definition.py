"""Turn a target's Parts into Apptainer definition files. The only module that knows the syntax.

A target renders as three layered files, built in this order, each from the one before with
`Bootstrap: localimage` (paths come as build arguments, so no machine path is committed):

  <t>.devel.def  compilers and the venv with torch, the network plugin and mpi4py
  <t>.base.def   the slim runtime: OS packages, plus the venv and plugin copied from devel
  <t>.def        the image: DeepSpeed and extras built on devel, copied onto base, with the
                 environment, %test, runscript, labels and help of every block

Each stage gets at most one section of each kind, with an echoed banner per block. A target
may build on another's devel and base layers (layer_sharing.py).
"""

import hashlib
from dataclasses import dataclass, field

from .. import __version__
from ..shell import cmd, export
from .blocks import parts_by_layer
from .parts import KEPT_MOUNT, build_arg
from .templating import templates

LAYERS = ("devel", "base", "image")
FILE_SUFFIX = {"devel": ".devel.def", "base": ".base.def", "image": ".def"}


@dataclass
class StageText:
    name: str
    bootstrap: str
    image: str
    files_from: str = ""
    files: list = field(default_factory=list)
    environment: list = field(default_factory=list)
    post: list = field(default_factory=list)
    test: list = field(default_factory=list)
    runscript: list = field(default_factory=list)
    labels: list = field(default_factory=list)
    help: list = field(default_factory=list)


def file_name(target_name, layer):
    return target_name + FILE_SUFFIX[layer]


def render_all(target, devel_text=None) -> dict:
    """{layer: definition text} for the three layers of a target. devel_text: the devel layer
    the image layer builds on when it is another target's (layer_sharing)."""
    layers = parts_by_layer(target)
    base_parts, top_parts = layers["base"], layers["top"]
    build, final = target.stage("build"), target.stage("final")

    devel = StageText("devel", build.bootstrap, build.image)
    _add_post(devel, base_parts, "build", starts_from=f"{build.bootstrap} {build.image}")

    base = StageText("base", final.bootstrap, final.image, files_from="devel")
    base.files = [(path, path) for p in base_parts for path in p.copy_from_build]
    _add_post(base, base_parts, "final")

    top_build = StageText("build", "localimage", build_arg("DEVEL"))
    # %post exports do not persist in an image: repeat the devel layer's (venv PATH, archs)
    inherited = [export(k, v) for p in base_parts if p.stage == "build" for k, v in p.build_env]
    top_build.post = ["echo '--- build: devel environment'", *inherited]
    top_build.files = [file for p in top_parts if p.stage == "build" for file in p.files]
    stages = {"devel": [devel]}
    own_devel = _render(target, "devel", stages)
    _add_post(top_build, top_parts, "build", starts_from=devel_text or own_devel)
    image = StageText("final", "localimage", build_arg("BASE"), files_from="build")
    # the venv gains DeepSpeed and the extras in the build stage; swap it in whole
    image.files = [(target.venv, f"{target.venv}.new")]
    image.post = ["echo '--- final: venv'", cmd("rm", "-rf", target.venv),
                  cmd("mv", f"{target.venv}.new", target.venv)]
    _add_post(image, top_parts, "final")
    image.environment = [export(k, v) for k, v in target.common_env]
    for part in base_parts + top_parts:
        if part.stage != "final":
            continue
        image.environment += [export(name, value) for name, value in part.env]
        if part.test:
            image.test += [f"echo '--- test: {part.block}'", *part.test]
        image.runscript += part.runscript
        image.labels += [f"{key} {value}" for key, value in part.labels]
        image.help += part.help

    stages.update(base=[StageText("devel", "localimage", build_arg("DEVEL")), base],
                  image=[top_build, image])
    return {"devel": own_devel, **{layer: _render(target, layer, stages) for layer in LAYERS[1:]}}


def _render(target, layer, stages):
    return templates.get_template("apptainer.def.j2").render(
        version=__version__, target=target, layer=layer, stages=stages[layer],
        file_name=file_name(target.name, layer))


def _add_post(stage, parts, which, starts_from=None):
    """Each part's %post lines under an echoed banner. A kept step's inputs are what the stage
    starts from, the OS packages installed in it and the step's own lines."""
    os_lines = [line for p in parts if p.stage == which and p.block == "os" for line in p.post]
    for part in parts:
        if part.stage != which:
            continue
        body = [export(name, value) for name, value in part.build_env]
        if part.kept:
            if starts_from is None:
                raise ValueError(f"{part.block}: only build stages can keep a step's output")
            body += _kept_step(part.kept, [starts_from, *os_lines, *body])
        body += part.post
        if body:
            # echoed, so a build log (and the build's progress lines) show the step
            stage.post += [f"echo '--- {stage.name}: {part.block}'"] + body


def _kept_step(kept, inputs) -> list:
    """The step, or its output put back from the builder's store when it holds one made from
    the same inputs; the folder's name carries their hash, and `complete` marks a whole copy."""
    material = "\n".join([*inputs, *kept.build, "--save", *kept.save, "--restore", *kept.restore])
    folder = f"{KEPT_MOUNT}/{kept.name}-{hashlib.sha256(material.encode()).hexdigest()[:16]}"
    save = " && ".join([*kept.save, 'touch "$kept/complete"'])
    return [f"kept={folder}",
            'if [ -e "$kept/complete" ]; then',
            f"    echo 'reusing {kept.name}, kept from a build with the same inputs'",
            *_indent(kept.restore),
            "else",
            *_indent(kept.build),
            '    if [ -d "$kept" ]; then',
            f"        {{ {save}; }} || echo 'could not keep {kept.name} for the next build'",
            "    fi",
            "fi"]


def _indent(lines):
    return ["    " + line for line in lines]
