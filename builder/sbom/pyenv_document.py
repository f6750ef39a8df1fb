"""A project env's SBOM, beside its file (requirements.cpu.sbom.json), in the image SBOM's
CycloneDX 1.6 shape (sbom/document.py): the env file is the subject, with the image it was
built for and the locks it came from as `hpcml:` properties; each distribution the env holds
is a component with its pypi purl and, where the lock names one file, that file's SHA-256.

Deterministic: the serial number derives from what the env holds and the image it is for,
the time is the builds' fixed SOURCE_DATE_EPOCH, so the same env always gives the same bytes.

Example: render(lock, facts, "requirements.cpu.sqsh") -> '{"bomFormat": "CycloneDX", ...}'
"""

import datetime
import uuid
import warnings

from cyclonedx.model import HashAlgorithm, HashType, Property
from cyclonedx.model.bom import Bom
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.output.json import JsonV1Dot6
from packageurl import PackageURL

from ..errors import ToolError
from ..lockfile import normal_name
from ..reproducible import SOURCE_DATE_EPOCH
from . import PROPERTY
from .document import _pypi_name, _validator

# the record's facts that the document names, and their property names
FACTS = {
    "target": "target",
    "image_distributions_sha256": "image-distributions-sha256",
    "python": "python",
    "lock_sha256": "pyenv-lock-sha256",
    "python_lock": "image-lock-sha256",
}


def render(lock, facts: dict, name: str) -> str:
    """lock: pyenv_lock.PyenvLock; facts: the env's record (layerbuild/pyenv.py)."""
    serial = f"hpc-ml-containers:pyenv:{lock.target}:{facts['image_distributions_sha256']}:{lock.digest()}"
    bom = Bom(serial_number=uuid.uuid5(uuid.NAMESPACE_URL, serial))
    bom.metadata.timestamp = datetime.datetime.fromtimestamp(SOURCE_DATE_EPOCH, datetime.UTC)
    properties = [Property(name=PROPERTY + key, value=str(facts[fact])) for fact, key in FACTS.items()]
    subject = Component(type=ComponentType.FILE, name=name, bom_ref="pyenv", properties=properties)
    bom.metadata.component = subject
    hashes = {pin.name: pin.hashes for pin in lock.pins}
    parts = []
    for dist_name, version in facts["distributions"]:
        purl = PackageURL(type="pypi", name=_pypi_name(dist_name), version=version)
        files = hashes.get(normal_name(dist_name), ())
        parts.append(
            Component(
                type=ComponentType.LIBRARY,
                name=dist_name,
                version=version,
                purl=purl,
                bom_ref=purl.to_string(),
                hashes=[HashType(alg=HashAlgorithm.SHA_256, content=files[0])] if len(files) == 1 else [],
            )
        )
    for part in parts:
        bom.components.add(part)
    bom.register_dependency(subject, parts)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = JsonV1Dot6(bom).output_as_string(indent=1) + "\n"
    problem = _validator().validate_str(text)
    if problem is not None:
        raise ToolError(f"the SBOM of {name} is not valid CycloneDX 1.6: {problem}")
    return text
