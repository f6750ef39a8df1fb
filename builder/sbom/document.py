"""An image's SBOM as a CycloneDX 1.6 JSON document, made with cyclonedx-python-lib from
what the image holds (inventory.Inventory) and what its labels measured.

- the image itself is the document's subject (a container), with its target, arch, layer
  key and measured stack (NCCL or RCCL, CUDA runtime or HIP, oldest driver) as properties;
- each installed Debian package is a component with its deb purl (distro from the image's
  os-release), each Python distribution one with its pypi purl;
- the communication library and GPU runtime the labels measured are generic components;
- DeepSpeed's component lists its compiled ops as `hpcml:deepspeed:op` properties, and has the
  SHA-256 of the wheel the image built and installed (inventory.built_wheels).

Deterministic: the serial number derives from the image's layer key and the timestamp is
the image's build date, so the same image always gives the same bytes.
"""

import uuid
import warnings

from cyclonedx.model import HashAlgorithm, HashType, Property
from cyclonedx.model.bom import Bom
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.output.json import JsonV1Dot6
from cyclonedx.schema import SchemaVersion
from packageurl import PackageURL

from ..errors import ToolError
from ..labels import BUILD_DATE, build_date
from ..recipes.validate import jsonschema_lazily
from . import KEY_PROPERTY, OP_PROPERTY, PROPERTY, ROOTFS_PROPERTY

# labels (less their prefix) that name a library the image carries, and the component's name
MEASURED_LIBRARIES = {
    "nccl.version": "nccl",
    "rccl.version": "rccl",
    "cuda.runtime": "cuda-runtime",
    "rocm.hip": "hip",
}


def render(target, key: str, labels: dict, inventory, rootfs_digest: str = "") -> str:
    """The SBOM's JSON text. target: the builder's Target; key: the image layer's key;
    rootfs_digest: the digest of its root file system's files (sbom/rootfs.py)."""
    bom = Bom(serial_number=uuid.uuid5(uuid.NAMESPACE_URL, f"hpc-ml-containers:{target.name}:{key}"))
    bom.metadata.timestamp = build_date(labels.get(BUILD_DATE, ""))
    image = Component(
        type=ComponentType.CONTAINER,
        name=target.name,
        version=labels.get("version.torch", target.torch.version),
        bom_ref="image",
        properties=_image_properties(target, key, labels, rootfs_digest),
    )
    bom.metadata.component = image
    parts = [*_debian(inventory), *_python(inventory), *_measured(labels)]
    for part in parts:
        bom.components.add(part)
    bom.register_dependency(image, parts)
    with warnings.catch_warnings():  # the library warns of what we do not describe (licenses, hashes)
        warnings.simplefilter("ignore")
        text = JsonV1Dot6(bom).output_as_string(indent=1) + "\n"
    problem = _validator().validate_str(text)
    if problem is not None:  # our own mistake, never the user's: say it plainly
        raise ToolError(f"the SBOM of {target.name} is not valid CycloneDX 1.6: {problem}")
    return text


def _validator():
    """CycloneDX's strict 1.6 validator, imported here rather than with the module: its
    jsonschema, imported first with the recipes' stand-ins, compiles rfc3987_syntax's
    grammars on the first iri check (about 2 s), not in every process that imports this
    module (each test worker's collection paid it)."""
    jsonschema_lazily()
    from cyclonedx.validation.json import JsonStrictValidator

    return JsonStrictValidator(SchemaVersion.V1_6)


def _image_properties(target, key, labels, rootfs_digest):
    facts = {"target": target.name, "arch": target.arch, KEY_PROPERTY[len(PROPERTY) :]: key}
    if rootfs_digest:
        facts[ROOTFS_PROPERTY[len(PROPERTY) :]] = rootfs_digest
    facts.update((name, labels[name]) for name in ("cuda.min_driver", *MEASURED_LIBRARIES) if labels.get(name))
    if target.archs:
        facts["gpu-archs"] = ",".join(target.archs)
    return [Property(name=PROPERTY + name, value=str(value)) for name, value in facts.items()]


def _debian(inventory):
    distro = f"{inventory.os.get('ID', 'debian')}-{inventory.os.get('VERSION_ID', '')}".rstrip("-")
    for name, version, arch in inventory.debs:
        purl = PackageURL(
            type="deb",
            namespace=inventory.os.get("ID", "debian"),
            name=name,
            version=version,
            qualifiers={"arch": arch, "distro": distro},
        )
        yield Component(type=ComponentType.LIBRARY, name=name, version=version, purl=purl, bom_ref=purl.to_string())


def _python(inventory):
    built = {(_pypi_name(name), version): sha256 for name, version, sha256 in inventory.wheels}
    for name, version in inventory.dists:
        purl = PackageURL(type="pypi", name=_pypi_name(name), version=version)
        ops = inventory.ops if purl.name == "deepspeed" else ()
        sha256 = built.get((purl.name, version))
        yield Component(
            type=ComponentType.LIBRARY,
            name=name,
            version=version,
            purl=purl,
            bom_ref=purl.to_string(),
            hashes=[HashType(alg=HashAlgorithm.SHA_256, content=sha256)] if sha256 else [],
            properties=[Property(name=OP_PROPERTY, value=op) for op in ops],
        )


def _pypi_name(name) -> str:
    return name.lower().replace("_", "-")


def _measured(labels):
    for label, name in MEASURED_LIBRARIES.items():
        if labels.get(label):
            purl = PackageURL(type="generic", name=name, version=labels[label])
            yield Component(
                type=ComponentType.LIBRARY, name=name, version=labels[label], purl=purl, bom_ref=purl.to_string()
            )
