"""Split Apptainer definition text into stages and sections, keeping every line verbatim.

spython's parser strips indentation, drops %setup and mangles %files and %labels (see the
reference notes), so the builder and its tests read .def files with this instead.
"""

import re
from dataclasses import dataclass, field

_SECTION = re.compile(r"^%([a-z]+)\b[ \t]*(.*)$")
_HEADER = re.compile(r"^([A-Za-z]+):[ \t]*(.*)$")


@dataclass
class Section:
    name: str
    args: str
    lines: list = field(default_factory=list)

    @property
    def body(self):
        return "\n".join(self.lines).strip("\n") + "\n"


@dataclass
class StageDef:
    header: dict
    sections: list = field(default_factory=list)

    def section(self, name, args=None):
        found = [s for s in self.sections if s.name == name and (args is None or s.args == args)]
        return found[0] if found else None


def split(text):
    """Return the stages of a .def file, in order."""
    stages, current, section = [], None, None
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header and header.group(1).lower() == "bootstrap":
            current = StageDef(header={})
            stages.append(current)
            section = None
        if current is None:
            continue
        match = _SECTION.match(line)
        if match:
            section = Section(match.group(1), match.group(2).strip())
            current.sections.append(section)
        elif section is not None:
            section.lines.append(line)
        elif header:
            current.header[header.group(1)] = header.group(2).strip()
    return stages
