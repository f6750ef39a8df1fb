"""`hpcml diff A B`: what changed between two images, read from their SBOMs (document.py's
CycloneDX JSON), so neither image has to be opened: Python distributions and Debian packages
added, removed or of another version, DeepSpeed ops added or removed, and the image facts
(the properties of the document's own component) that differ.

Example: a, b = load("images/cpu.sif"), load("/appl/local/ml/pytorch/2.13-cpu");
compare(a, b) -> [Section("Python distributions", ("changed  numpy 2.4.6 -> 2.4.7",))], which
text(a, b, sections) prints under the two images' layer keys, with "1 change" last.
"""

import json
from collections import Counter
from pathlib import Path
from typing import NamedTuple
from urllib.parse import parse_qs

from ..errors import RecipeError
from ..invocation import hint
from ..lockfile import normal_name as normal
from . import KEY_PROPERTY, OP_PROPERTY, PROPERTY, PUBLISHED, PYENV_SUFFIX, SUFFIX, path_for, pyenv_path_for

EXPECTED = (
    f"expected an image (.sif), a project env ({PYENV_SUFFIX}), an SBOM (*{SUFFIX}, {PUBLISHED}) or a published "
    "version folder"
)
SHORT_KEY = 12  # characters of the layer key in the header: enough to tell two apart


class Section(NamedTuple):
    """One kind of difference: its title and one line per change, e.g. "added    regex 1.0"."""

    title: str
    lines: tuple


def load(argument: str) -> dict:
    """The parsed SBOM that ``argument`` names: an image (the SBOM beside it), an SBOM file or
    a published version folder (its sbom.cdx.json); a RecipeError for anything else."""
    path = Path(argument)
    if path.is_dir():
        sbom = path / PUBLISHED
        if not sbom.is_file():
            raise RecipeError(f"a folder without {PUBLISHED}; {EXPECTED}", file=argument)
    elif path.name.endswith(".sif"):
        sbom = path_for(path)
        if not sbom.is_file() and not path.exists():
            raise RecipeError(f"no such image, and no SBOM beside it ({sbom})", file=argument)
        if not sbom.is_file():
            raise _no_sbom(argument, path, sbom)
    elif path.name.endswith(PYENV_SUFFIX):
        sbom = pyenv_path_for(path)
        if not sbom.is_file():
            raise RecipeError(f"no SBOM beside the env ({sbom}); hpcml env build writes it", file=argument)
    elif path.name.endswith(SUFFIX) or path.name == PUBLISHED:
        sbom = path
    else:
        raise RecipeError(EXPECTED, file=argument)
    return _parsed(sbom)


def _no_sbom(argument: str, image: Path, sbom: Path) -> RecipeError:
    """An image built before SBOMs (or its SBOM removed), or a layer below an image: a layer
    (cpu.base.sif) never gets one, its target's image (cpu.sif) does."""
    target, _, layer = image.name.removesuffix(".sif").partition(".")
    if layer:
        return RecipeError(
            f"a layer below {image.parent / target}.sif, which alone has an SBOM; compare that image", file=argument
        )
    build = hint(f"make build TARGET={target}", f"build {target} --images {image.parent}")
    return RecipeError(f"no SBOM beside it ({sbom}); run {build}, which writes it", file=argument)


def _parsed(sbom: Path) -> dict:
    try:
        document = json.loads(sbom.read_text())
    except FileNotFoundError:
        raise RecipeError(f"not found; {EXPECTED}", file=str(sbom)) from None
    except (OSError, ValueError) as error:  # UnicodeDecodeError is a ValueError too
        raise RecipeError(f"not a readable JSON SBOM ({error})", file=str(sbom)) from None
    if not isinstance(document, dict) or "components" not in document and document.get("bomFormat") != "CycloneDX":
        raise RecipeError("not a CycloneDX SBOM: it has no list of components", file=str(sbom))
    components = document.setdefault("components", [])  # cyclonedx leaves out an empty list
    if not isinstance(components, list) or not all(isinstance(c, dict) for c in components):
        raise RecipeError("not a CycloneDX SBOM: its components are no list of objects", file=str(sbom))
    return document


def compare(a: dict, b: dict) -> list[Section]:
    """What changed from ``a`` to ``b``: the sections that have a change, in a fixed order."""
    sections = [
        Section("Python distributions", _versions(_dists(a), _dists(b))),
        Section("Debian packages", _versions(_debs(a), _debs(b))),
        Section("DeepSpeed ops", _members(_ops(a), _ops(b))),
        Section("Image facts", _facts(_properties(a), _properties(b))),
    ]
    return [section for section in sections if section.lines]


def text(a: dict, b: dict, sections: list[Section]) -> str:
    """The report: which image each side is, the sections, and how many changes in all."""
    lines = [line for line in (_header("A", a), _header("B", b)) if line]
    for section in sections:
        lines += [section.title, *(f"  {line}" for line in section.lines)]
    count = sum(len(section.lines) for section in sections)
    lines.append(f"{count} change{'' if count == 1 else 's'}" if count else "no differences")
    return "\n".join(lines) + "\n"


def _versions(old: dict, new: dict) -> tuple:
    """old, new: {key: (name as shown, version)}; added, then removed, then changed."""
    added = [f"added    {' '.join(new[key])}" for key in sorted(new.keys() - old.keys())]
    removed = [f"removed  {' '.join(old[key])}" for key in sorted(old.keys() - new.keys())]
    changed = [
        f"changed  {new[key][0]} {old[key][1]} -> {new[key][1]}"
        for key in sorted(old.keys() & new.keys())
        if old[key][1] != new[key][1]
    ]
    return (*added, *removed, *changed)


def _members(old: set, new: set) -> tuple:
    return (*(f"added    {op}" for op in sorted(new - old)), *(f"removed  {op}" for op in sorted(old - new)))


def _facts(old: dict, new: dict) -> tuple:
    changed = sorted(name for name in old.keys() | new.keys() if old.get(name) != new.get(name))
    return tuple(f"changed  {name} {old.get(name, '(none)')} -> {new.get(name, '(none)')}" for name in changed)


def _components(document: dict, purl_type: str) -> list:
    prefix = f"pkg:{purl_type}/"
    return [c for c in document["components"] if str(c.get("purl", "")).startswith(prefix) and c.get("name")]


def _dists(document: dict) -> dict:
    """{PEP 503 name: (name as its metadata spells it, version)}: Jinja2 is jinja2 elsewhere."""
    return {normal(c["name"]): (c["name"], str(c.get("version", ""))) for c in _components(document, "pypi")}


def _debs(document: dict) -> dict:
    """{name, or name:arch for a foreign architecture's package: (that, version)}."""
    found = [(c["name"], str(c.get("version", "")), _arch(c["purl"])) for c in _components(document, "deb")]
    native = Counter(arch for _, _, arch in found if arch != "all").most_common(1)
    usual = {"all", native[0][0] if native else ""}
    keys = [name if arch in usual else f"{name}:{arch}" for name, _, arch in found]
    return {key: (key, version) for key, (_, version, _) in zip(keys, found)}


def _arch(purl: str) -> str:
    return parse_qs(purl.partition("?")[2]).get("arch", [""])[0]


def _ops(document: dict) -> set:
    deepspeed = [c for c in _components(document, "pypi") if normal(c["name"]) == "deepspeed"]
    return {p.get("value") for c in deepspeed for p in c.get("properties", []) if p.get("name") == OP_PROPERTY}


def _properties(document: dict) -> dict:
    """{name less our prefix: value} of the image's own properties, less the layer key (it
    always differs; the header shows it)."""
    found = {p.get("name", ""): str(p.get("value", "")) for p in _image(document).get("properties", [])}
    return {name.removeprefix(PROPERTY): value for name, value in found.items() if name != KEY_PROPERTY}


def _image(document: dict) -> dict:
    metadata = document.get("metadata")
    component = metadata.get("component") if isinstance(metadata, dict) else None
    return component if isinstance(component, dict) else {}


def _header(side: str, document: dict):
    """ "A: cpu layer key 7b82619304ca", or None for an SBOM without a layer key."""
    image = _image(document)
    properties = {p.get("name"): p.get("value") for p in image.get("properties", [])}
    key = properties.get(KEY_PROPERTY)
    if not key:
        return None
    target = properties.get(PROPERTY + "target") or image.get("name", "?")
    return f"{side}: {target} layer key {str(key)[:SHORT_KEY]}"
