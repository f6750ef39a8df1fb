"""Small SBOM documents shaped as builder/sbom/document.render writes them, for the tests
of what reads them (sbom/diff.py, publish/release_notes.py)."""

import json

from builder import sbom
from builder.sbom import diff

KEY = "7b82619304ca1e7601ca17fe5a2600067a639acef7a66ce0247035194be6bdfb"
DISTS = {"Jinja2": "3.1.6", "numpy": "2.4.6", "deepspeed": "0.19.8", "six": "1.17.0"}
DEBS = (("adduser", "3.134", "all"), ("bash", "5.2.15-2+b7", "amd64"), ("libc6", "2.36-9", "amd64"))
OPS = ("cpu_adam_op", "fused_adam_op")
FACTS = {"target": "cpu", "arch": "x86_64", "layer-key": KEY}


def document_json(dists=DISTS, debs=DEBS, ops=OPS, facts=FACTS) -> str:
    """An SBOM as document.render writes it: the image's properties, each Debian package and
    Python distribution a component, DeepSpeed's ops its properties."""
    components = [
        {"name": n, "version": v, "purl": f"pkg:deb/debian/{n}@{v}?arch={a}&distro=debian-12"} for n, v, a in debs
    ]
    for name, version in dists.items():
        component = {"name": name, "version": version, "purl": f"pkg:pypi/{name.lower()}@{version}"}
        if name == "deepspeed":
            component["properties"] = [{"name": diff.OP_PROPERTY, "value": op} for op in ops]
        components.append(component)
    properties = [{"name": sbom.PROPERTY + name, "value": value} for name, value in facts.items()]
    image = {"type": "container", "name": facts.get("target", "cpu"), "version": "2.13.0", "properties": properties}
    return json.dumps({"bomFormat": "CycloneDX", "metadata": {"component": image}, "components": components})


def write(path, **changes):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(document_json(**changes))
    return str(path)
