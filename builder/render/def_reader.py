"""A definition read back into its stages, as `apptainer build` reads it (apptainer's
pkg/build/types/parser/deffile.go): `{{ NAME }}` replaced with its build argument, a stage
from each line that starts with `Bootstrap:`, its header up to the first line whose first
word starts with %, and a section from each such line to the next one. For the builds that
run a definition's steps without Apptainer (layerbuild/unpacked.py): they take the sections
Apptainer runs in an image from an image, and refuse the others in one line.

Example: stages(substituted(text, {"RUNTIME_WHEEL": "/tmp/w.whl"}))[0].header["from"]
-> "/appl/local/laifs/containers/...sif"; .files("build") -> (("/opt/venv", "/opt/venv.new"),)
"""

import re
from dataclasses import dataclass

from ..errors import ToolError, shown
from ..values.apptainer import BUILD_ARG

_STAGE_START = re.compile(r"^bootstrap:", re.IGNORECASE | re.MULTILINE)
# What a stage built from an image may hold: the rest need the host (%setup, %pre) or apps
SECTIONS = ("files", "post", "environment", "test", "labels", "help", "runscript", "startscript")


@dataclass(frozen=True)
class Section:
    name: str  # lower case, without the %: "files", "post"
    args: str  # the rest of its line: "from build" for `%files from build`
    body: str  # the lines up to the next section, as written


@dataclass(frozen=True)
class StageText:
    header: dict  # lower-case keys: {"bootstrap": "localimage", "from": "...", "stage": "final"}
    sections: tuple  # Section, in the order written

    @property
    def name(self) -> str:
        return self.header.get("stage", "")

    def script(self, name) -> str:
        """The body of every %name section, in order (Apptainer joins them)."""
        return "".join(section.body for section in self.sections if section.name == name)

    def files(self, from_stage=None) -> tuple:
        """(source, destination) of each %files line (of `%files from STAGE` when given);
        a line with one path copies it to the same path."""
        args = f"from {from_stage}" if from_stage else ""
        pairs = []
        for section in self.sections:
            if section.name != "files" or section.args.split("#")[0].strip() != args:
                continue
            for line in section.body.splitlines():
                words = [word.strip('"') for word in line.split()]
                if words and not words[0].startswith("#"):
                    pairs.append((words[0], words[1] if len(words) > 1 else words[0]))
        return tuple(pairs)

    def from_stages(self) -> tuple:
        """The stages a `%files from STAGE` section names."""
        names = (section.args.split("#")[0].split() for section in self.sections if section.name == "files")
        return tuple(words[1] for words in names if len(words) == 2 and words[0] == "from")

    def labels(self) -> dict:
        """%labels as Apptainer splits each line: the name, then the rest, both trimmed."""
        return _label_lines(self.script("labels"))


def substituted(text: str, args: dict) -> str:
    """``text`` with each {{ NAME }} replaced; one line naming a NAME no argument gives."""
    missing = sorted({name for name in BUILD_ARG.findall(text) if name not in args})
    if missing:
        raise ToolError(f"the definition asks for build arguments no one gave: {', '.join(map(shown, missing))}")
    return BUILD_ARG.sub(lambda found: args[found[1]], text)


def stages(text: str) -> list:
    """The stages of a definition, in order; one line for a section this reader does not run."""
    starts = [found.start() for found in _STAGE_START.finditer(text)]
    return [_stage(text[start:end]) for start, end in zip(starts, [*starts[1:], len(text)])]


def label_lines(text: str) -> dict:
    """Lines of `NAME VALUE`, as Apptainer reads %labels and the file $APPTAINER_LABELS."""
    return _label_lines(text)


def _stage(text: str) -> StageText:
    header, sections, current = {}, [], None
    for line in text.splitlines(keepends=True):
        words = line.split()
        if words and words[0].startswith("%"):
            name = words[0].lstrip("%").lower()
            if name not in SECTIONS:
                raise ToolError(
                    f"the definition's %{name} section: not run by a build without Apptainer; "
                    f"expected only {', '.join('%' + known for known in SECTIONS)}"
                )
            current = [name, line.split(None, 1)[1].strip() if len(words) > 1 else "", ""]
            sections.append(current)
        elif current is not None:
            current[2] += line
        elif words and not words[0].startswith("#") and ":" in line:
            key, value = line.split("#")[0].split(":", 1)
            header[key.strip().lower()] = value.strip()
    return StageText(header, tuple(Section(*section) for section in sections))


def _label_lines(text: str) -> dict:
    labels = {}
    for line in text.strip().split("\n"):
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, value = line.partition(" ")
            labels[name.strip()] = value.strip()
    return labels
