"""Turn a target's Parts into Apptainer definition files. The only module that knows the syntax.

A target renders as three layered files, built in this order, each from the one before with
`Bootstrap: localimage` (paths come as build arguments, so no machine path is committed):

  <t>.devel.def  compilers and the venv with torch, the network plugin and mpi4py
  <t>.base.def   the slim runtime: OS packages, plus the venv and plugin copied from devel
  <t>.def        the image: DeepSpeed and extras built on devel, copied onto base, with the
                 environment, %test, runscript, labels and help of every block

Each stage gets at most one section of each kind, with an echoed banner per block. A target
may build on another's devel and base layers (layer_sharing.py). A site-image target is one
file, <t>.def, whose stages start from the site's own image (a site fact, written as it is).
Every value is checked or quoted as Apptainer reads it back (values/apptainer.py).
"""

import hashlib
from dataclasses import dataclass, field, replace

from .. import __version__
from ..recipes.target_model import Target
from ..reproducible import stage_post
from ..values import apptainer
from ..values.check import comment
from ..values.shell import cmd, export
from .blocks import parts_by_layer
from .blocks.python import venv_env
from .blocks.torch import arch_env as _arch_env
from .parts import KEPT_MOUNT
from .plan import LAYERS, MIRROR_ARG, PARENT_ARGS, LayerPlan, file_name
from .templating import templates


@dataclass
class StageText:
    name: str
    bootstrap: str
    image: str
    files_from: str = ""
    files: list = field(default_factory=list)
    setup: list = field(default_factory=list)  # on the build host, before %files and %post
    environment: list = field(default_factory=list)
    post: list = field(default_factory=list)
    test: list = field(default_factory=list)
    runscript: list = field(default_factory=list)
    labels: list = field(default_factory=list)
    help: list = field(default_factory=list)
    # what the build needs to know, gathered while the text is made (never read back from it)
    args: set = field(default_factory=set)  # build arguments the stage uses
    kept: list = field(default_factory=list)  # its kept steps' folder names
    pip_indexes: list = field(default_factory=list)  # web indexes its pip lines name
    git_sources: list = field(default_factory=list)  # git URLs its lines fetch

    def __post_init__(self):
        if self.bootstrap == "debootstrap":
            self.args.add(MIRROR_ARG)

    @classmethod
    def debian_root(cls, name, stage, target: Target, **fields):
        """A stage that starts from a Debian root made by debootstrap: Apptainer's own
        bootstrap on x86_64, whose architecture is always the host's, so another architecture
        runs debootstrap with --arch itself, on the host, into an empty root (it runs the new
        root's programs natively on a host of that architecture, under QEMU elsewhere)."""
        if stage.bootstrap != "debootstrap" or not target.debootstraps_itself:
            return cls(name, stage.bootstrap, stage.image, **fields)
        root = cls(name, "scratch", "", args={MIRROR_ARG}, **fields)
        how = f"--arch={target.debian_arch} --variant=minbase --include=apt {stage.image}"
        root.setup = [
            f"echo '--- {name}: debootstrap --arch={target.debian_arch} {stage.image}'",
            f'debootstrap {how} "$APPTAINER_ROOTFS" {apptainer.build_arg(MIRROR_ARG)}',
        ]
        return root

    @classmethod
    def from_layer(cls, name, layer, **fields):
        """A stage that starts from another layer of this target, named by a build argument."""
        arg = next(arg for arg, parent in PARENT_ARGS.items() if parent == layer)
        return cls(name, "localimage", apptainer.build_arg(arg), args={arg}, **fields)

    def take(self, part):
        """The build facts of a part rendered into this stage."""
        self.args.update(part.build_args)
        self.pip_indexes += [url for url in part.pip_indexes if url not in self.pip_indexes]
        self.git_sources += [url for url in part.git_sources if url not in self.git_sources]


def lower_layer_parts(target: Target) -> tuple:
    """What the devel and base layers are made of: the stages they start from and the parts
    as far as those layers hold them (environment, tests, runscript, labels and help go to
    the image layer), with the GPU arch list left out: torch's wheel is built already, and
    the image layer exports the archs again where DeepSpeed compiles for them."""
    masked = {name for name, _ in _arch_env(target)}

    def held(part):
        build_env = tuple((k, "(archs)" if k in masked else v) for k, v in part.build_env)
        return replace(part, build_env=build_env, env=(), test=(), runscript=(), labels=(), help=())

    build, final = target.stage("build"), target.stage("final")
    return (
        target.arch,
        (build.bootstrap, build.image),
        (final.bootstrap, final.image),
        tuple(held(part) for part in parts_by_layer(target)["base"]),
    )


def render_all(target: Target, devel_text=None) -> dict:
    """{layer: LayerPlan} for the three layers of a target. devel_text: the devel layer the
    image layer builds on when it is another target's (layer_sharing). A site-image target
    has one layer, whose two stages start from the site's image."""
    where = _where(target)
    apptainer.check_target(target, where)
    layers = parts_by_layer(target)
    base_parts, top_parts = layers["base"], layers["top"]
    if target.site_image:
        path = target.site_image.path
        top_build = StageText("build", "localimage", path)
        image = StageText("final", "localimage", path, files_from="build")
        _image_stages(target, base_parts, top_parts, top_build, image, f"localimage {path}")
        return {"image": _render(target, "image", {"image": [top_build, image]}, site_image=path)}
    build, final = target.stage("build"), target.stage("final")

    devel = StageText.debian_root("devel", build, target)
    _add_post(devel, base_parts, "build", starts_from=f"{build.bootstrap} {build.image}", where=where)

    base = StageText.debian_root("base", final, target, files_from="devel")
    base.files = [(path, path) for p in base_parts for path in p.copy_from_build]
    _add_post(base, base_parts, "final", where=where)

    top_build = StageText.from_layer("build", "devel")
    # %post exports do not persist in an image: repeat the devel layer's (venv PATH, archs)
    inherited = [apptainer.export_line(k, v, where) for p in base_parts if p.stage == "build" for k, v in p.build_env]
    top_build.post = ["echo '--- build: devel environment'", *inherited]
    stages = {"devel": [devel]}
    own_devel = _render(target, "devel", stages).text
    image = StageText.from_layer("final", "base", files_from="build")
    _image_stages(target, base_parts, top_parts, top_build, image, devel_text or own_devel)
    stages.update(base=[StageText.from_layer("devel", "devel"), base], image=[top_build, image])
    apt = {"devel": _apt(target, base_parts, "build"), "base": _apt(target, base_parts, "final")}
    apt["image"] = tuple(sorted(target.deepspeed.packages))  # the ops' own: the top layer installs them
    return {layer: _render(target, layer, stages, apt_packages=apt[layer]) for layer in LAYERS}


def _apt(target: Target, base_parts, stage) -> tuple:
    """The packages the stage's apt-get installs: the recipe's and those its blocks ask for."""
    own = target.os.packages.build if stage == "build" else target.os.packages.final
    return tuple(sorted({*own, *(name for part in base_parts if part.stage == stage for name in part.packages)}))


def _image_stages(target: Target, base_parts, top_parts, top_build, image, starts_from):
    """Fill the image layer's two stages: the top blocks' build steps on the devel layer (or
    the site's image), their venv swapped whole into the final stage, and the environment,
    %test, runscript, labels and help of every block."""
    where = _where(target)
    for part in top_parts:
        if part.stage == "build" and part.files:
            top_build.files += part.files
            top_build.take(part)
    _add_post(top_build, top_parts, "build", starts_from=starts_from, where=where)
    # the venv gains DeepSpeed and the extras in the build stage; swap it in whole
    venv = target.python.venv
    image.files = [(venv, f"{venv}.new")]
    image.post = ["echo '--- final: venv'", cmd("rm", "-rf", venv), cmd("mv", f"{venv}.new", venv)]
    _add_post(image, top_parts, "final", where=where)
    image.environment = [apptainer.export_line(k, v, where) for k, v in target.common_env]
    for part in base_parts + top_parts:
        if part.stage != "final":
            continue
        image.environment += [apptainer.export_line(name, value, where) for name, value in part.env]
        if part.test:
            image.test += [f"echo '--- test: {part.block}'", *part.test]
        image.runscript += part.runscript
        image.labels += [apptainer.label_line(key, value, where) for key, value in part.labels]
        image.help += [apptainer.line_value(line, "%help line", where) for line in part.help]


def render_extension(target: Target, name, steps, source, context, guard=((), ())) -> LayerPlan:
    """The one-stage layer `hpcml extend` builds on the target's image: a Dockerfile's steps
    (dockerfile.DockerSteps) with the image's venv first on PATH, their files from the folder
    ``context``, ``guard``'s %post lines (before, after) around them, a %test of the stack."""
    where = apptainer.line_value(source, "the Dockerfile's name", "command line")
    apptainer.check_steps(steps, where)
    stage = StageText.from_layer("final", "base")
    stage.files = [(f"{context}/{source_path}", dest) for source_path, dest in steps.files]
    venv = target.python.venv
    stage.post = [cmd("echo", f"--- extend: the steps of {source}"), "set +u"]
    stage.post += [export(k, v) for k, v in venv_env(venv)]
    stage.post += [*guard[0], *steps.post, *guard[1]]
    stage.environment = [apptainer.docker_env(assignment, where) for assignment in steps.env]
    stage.test = [cmd(f"{venv}/bin/python", "-c", "import torch, deepspeed, mpi4py")]
    stage.runscript = list(steps.runscript)
    stage.labels = [apptainer.label_line(key, value, where) for key, value in steps.labels]
    stage.labels += [
        apptainer.label_line("org.hpc-ml-containers.extended.from", target.name, where),
        apptainer.label_line("org.hpc-ml-containers.extended.steps", source, where),
    ]
    apptainer.check_stage(stage, where)
    text = templates.get_template("extension.def.j2").render(
        version=__version__,
        name=comment(name),
        target_name=comment(target.name),
        description=comment(target.description),
        source=comment(source),
        stages=[stage],
    )
    return LayerPlan(layer="image", owner=name, text=text, build_args=tuple(sorted(stage.args)), parents=("base",))


def _where(target: Target) -> str:
    return f"target {target.name}"


def _render(target: Target, layer, stages, site_image="", apt_packages=()) -> LayerPlan:
    # copies: the devel layer's stages are rendered twice (once for the image layer's kept step)
    debian_layer = layer if not site_image and target.stage("final").bootstrap == "debootstrap" else None
    fixed = [replace(s, post=stage_post(s.name, s.post, debian_layer)) for s in stages[layer]]
    for stage in fixed:
        apptainer.check_stage(stage, _where(target))
    text = templates.get_template("apptainer.def.j2").render(
        version=__version__,
        name=comment(target.name),
        description=comment(target.description),
        layer=layer,
        stages=fixed,
        file_name=file_name(target.name, layer),
        mirror=apptainer.build_arg(MIRROR_ARG),
    )
    args = {arg for stage in stages[layer] for arg in stage.args}
    return LayerPlan(
        layer=layer,
        owner=target.name,
        text=text,
        build_args=tuple(sorted(args)),
        parents=tuple(parent for arg, parent in PARENT_ARGS.items() if arg in args),
        kept=tuple(dict.fromkeys(k for stage in stages[layer] for k in stage.kept)),
        pip_indexes=tuple(dict.fromkeys(u for stage in stages[layer] for u in stage.pip_indexes)),
        base_images=tuple(dict.fromkeys(s.image for s in stages[layer] if s.bootstrap == "docker")),
        git_sources=tuple(dict.fromkeys(u for stage in stages[layer] for u in stage.git_sources)),
        site_image=site_image,
        apt_packages=apt_packages,
    )


def _add_post(stage, parts, which, starts_from=None, where="the recipes"):
    """Each part's %post lines under an echoed banner. A kept step's inputs are what the stage
    starts from, the environment the stage exports beyond it, the OS packages installed in it
    and the step's own lines."""
    os_lines = [line for p in parts if p.stage == which and p.block == "os" for line in p.post]
    for part in parts:
        if part.stage != which:
            continue
        body = [apptainer.export_line(name, value, where) for name, value in part.build_env]
        if part.kept:
            if starts_from is None:
                raise ValueError(f"{part.block}: only build stages can keep a step's output")
            # h100-cuda builds on a100-cuda's devel layer and exports its own arch list over it:
            # an export the layer below does not hold is an input (one it holds adds nothing)
            below = set(starts_from.splitlines())
            exported = [line for line in stage.post if line.startswith("export ") and line not in below]
            folder, lines = _kept_step(part.kept, [starts_from, *exported, *os_lines, *body])
            stage.kept.append(folder)
            body += lines
        body += part.post
        if body:
            # echoed, so a build log (and the build's progress lines) show the step
            stage.post += [f"echo '--- {stage.name}: {part.block}'"] + body
            stage.take(part)


def _kept_step(kept, inputs) -> tuple:
    """(folder name, lines): the step, or its output put back (its sha256 list checked) from the
    builder's store when it holds one made from the same inputs; the folder's name carries
    their hash, and `complete` marks a whole copy."""
    material = "\n".join([*inputs, *kept.build, "--save", *kept.saved(), "--restore", *kept.restored()])
    folder = f"{kept.name}-{hashlib.sha256(material.encode()).hexdigest()[:16]}"
    save = " && ".join([*kept.saved(), 'touch "$kept/complete"'])
    return folder, [
        f"kept={KEPT_MOUNT}/{folder}",
        'if [ -e "$kept/complete" ]; then',
        f"    echo 'reusing {kept.name}, kept from a build with the same inputs'",
        *_indent(kept.restored()),
        "else",
        *_indent(kept.build),
        '    if [ -d "$kept" ]; then',
        f"        {{ {save}; }} || echo 'could not keep {kept.name} for the next build'",
        "    fi",
        "fi",
    ]


def _indent(lines):
    return ["    " + line for line in lines]
