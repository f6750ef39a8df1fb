"""Turn a target's Parts into Apptainer definition text. The only module that knows the syntax.

Each stage gets at most one section of each kind, with a banner per block inside it.
"""

from dataclasses import dataclass, field

import jinja2

from . import __version__
from .blocks import parts_for
from .shell import export


@dataclass
class StageText:
    name: str
    bootstrap: str
    image: str
    final: bool
    copy_from_build: list = field(default_factory=list)
    environment: list = field(default_factory=list)
    post: list = field(default_factory=list)
    test: list = field(default_factory=list)
    runscript: list = field(default_factory=list)
    labels: list = field(default_factory=list)
    help: list = field(default_factory=list)


_env = jinja2.Environment(
    loader=jinja2.PackageLoader("builder", "templates"),
    undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
    trim_blocks=True, lstrip_blocks=True, autoescape=False)


def render(target) -> str:
    stages = {stage.name: StageText(stage.name, stage.bootstrap, stage.image,
                                    final=stage.name == "final") for stage in target.stages}
    for part in parts_for(target):
        stage = stages[part.stage]
        stage.copy_from_build += part.copy_from_build
        body = [export(name, value) for name, value in part.build_env] + list(part.post)
        if body:
            # echoed, so a build log (and the build's progress lines) show the step
            stage.post += [f"echo '--- {part.stage}: {part.block}'"] + body
        if part.test:
            stage.test += [f"echo '--- test: {part.block}'"] + list(part.test)
        stage.environment += [export(name, value) for name, value in part.env]
        stage.runscript += part.runscript
        stage.labels += [f"{key} {value}" for key, value in part.labels]
        stage.help += part.help
    final = stages["final"]
    final.environment = [export(name, value) for name, value in target.common_env] + final.environment
    return _env.get_template("apptainer.def.j2").render(
        version=__version__, target=target, stages=list(stages.values()))
