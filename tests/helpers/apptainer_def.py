"""A definition file read as `apptainer build` reads it, for tests of what a value written into
one becomes. Ported from Apptainer's Go source (github.com/apptainer/apptainer):

- internal/pkg/build/args/reader.go: ``{{ NAME }}`` (Go's \\s and \\w, ASCII) is replaced with
  a build argument anywhere, unless the text between the line's start (or the previous
  replacement) and it holds a ``#`` followed by anything but ``!``; there is no escape;
- pkg/build/types/parser/deffile.go, `All`: a stage starts at each ``(?mi)^bootstrap:``;
  `scanDefinitionFile`: lines end at ``\\n`` (a ``\\r`` before it is dropped, bufio.ScanLines),
  a line whose first word (bufio.ScanWords: after Unicode spaces) starts with ``%`` starts a
  section, the lines before the first are the header; `doHeader`: each line trimmed, empty and
  ``#`` lines skipped, cut at its first ``#``, split at its first ``:``, a trailing ``\\``
  continues it; `GetLabels`: the section trimmed, split at ``\\n``, each line trimmed, empty
  and ``#`` lines skipped, split at its first space, both halves trimmed (strings.TrimSpace);
  %files: lines trimmed, ``#`` lines skipped, words by `fileSplitter`, ``"`` trimmed.

spython's SingularityParser reads these files too, but strips indentation and reads %labels
and %files its own way (tests/helpers/deffile.py says how), so it cannot say what Apptainer
gets; helpers/deffile.py keeps each line verbatim for the render tests, by column-0 ``%``.

Example: stages(text)[0].labels == {"org.hpc-ml-containers.target": "cpu", ...}
"""

import re
from dataclasses import dataclass, field

# unicode.IsSpace: what Go's strings.TrimSpace and bufio.ScanWords take for a space
GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
BUILD_ARG = re.compile(r"{{[ \t\n\f\r]*([0-9A-Za-z_]+)[ \t\n\f\r]*}}")
_COMMENT = re.compile(r"#[^!]")  # commentLineRegexp, `\s*[#][^!]\s*.*`, unanchored
_STAGE = re.compile(r"^bootstrap:", re.IGNORECASE | re.MULTILINE)
_FILE_WORD = re.compile(r"""([^\s"']*{{\s*\w+\s*}}*[^\s{}"']*)+|([^\s"']+|"([^"]*)"|'([^']*))""", re.ASCII)


def trim(text: str) -> str:
    return text.strip(GO_SPACE)


def substituted(text: str) -> list:
    """The build-argument names apptainer build replaces in ``text``, in order."""
    names, done = [], 0
    for match in BUILD_ARG.finditer(text):
        newline = text.rfind("\n", done, match.start())
        if _COMMENT.search(text[done if newline < 0 else newline : match.start()]):
            continue
        names.append(match.group(1))
        done = match.end()
    return names


@dataclass
class Section:
    name: str  # as Apptainer keys it: lower case, without the %
    args: str
    body: str


@dataclass
class Stage:
    header: dict
    sections: list = field(default_factory=list)

    def section(self, name) -> str:
        """The section's text, its parts joined as Apptainer joins them ("" when absent)."""
        return "".join(s.body for s in self.sections if s.name == name)

    @property
    def labels(self) -> dict:
        labels = {}
        for line in trim(self.section("labels")).split("\n"):
            line = trim(line)
            if not line or line.startswith("#"):
                continue
            key, _, value = line.partition(" ")
            labels[trim(key)] = trim(value)
        return labels

    @property
    def files(self) -> list:
        """[(source, destination)] of every %files section."""
        pairs = []
        for section in (s for s in self.sections if s.name == "files"):
            for line in trim(section.body).split("\n"):
                line = trim(line)
                if not line or line.startswith("#"):
                    continue
                words = [m.group(0) for m in _FILE_WORD.finditer(line)]
                source, dest = (words + [""])[:2]
                pairs.append((trim(source).strip('"'), trim(dest).strip('"')))
        return pairs

    def shape(self) -> tuple:
        """What a value must not change: the header's keys and the sections, in order."""
        return tuple(sorted(self.header)), tuple((s.name, s.args) for s in self.sections)


def stages(text: str) -> list:
    """The stages of a definition, as `apptainer build` reads them."""
    starts = [m.start() for m in _STAGE.finditer(text)]
    chunks = [text[a:b] for a, b in zip([0, *starts], [*starts, len(text)], strict=True)]
    found = []
    for chunk in chunks:
        header, sections = _tokens(chunk)
        stage = Stage(_header(header or ""))
        if not stage.header and not sections:  # comments alone: errEmptyDefinition, passed over
            continue
        for token in sections:
            first, _, body = token.partition("\n")
            words = first.lstrip("%").split(" ", 1)
            stage.sections.append(Section(words[0].lower(), words[1] if len(words) > 1 else "", body))
        found.append(stage)
    return found


def _lines(text):
    """bufio.ScanLines: split at \\n, a \\r before it dropped; no empty last line."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _tokens(chunk):
    """(header text or None, [section text, ...]) as scanDefinitionFile cuts them."""
    header, sections, current = [], [], None
    for line in _lines(chunk):
        if line.lstrip(GO_SPACE).startswith("%"):
            current = [line]
            sections.append(current)
        elif current is not None:
            current.append(line)
        else:
            header.append(line)
    text = "".join(line + "\n" for line in header)
    return (text if trim(text) else None), ["".join(line + "\n" for line in s) for s in sections]


def _header(text):
    header, key_cont, value_cont = {}, "", ""
    for line in trim(text).split("\n"):
        line = trim(line)
        if not line or line.startswith("#"):
            if key_cont:
                header[key_cont], key_cont, value_cont = value_cont, "", ""
            continue
        cut = line.split("#")[0]
        if not value_cont:
            key, colon, value = cut.partition(":")
            if not colon:
                raise ValueError(f"header key {key} had no val")
            key, value = trim(key).lower(), trim(value)
        else:
            key, value = key_cont, value_cont + trim(cut)
            key_cont, value_cont = "", ""
        if value.endswith("\\"):
            key_cont, value_cont = key, value[:-1]
            continue
        header[key] = value
    return header
