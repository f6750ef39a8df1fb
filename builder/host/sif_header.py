"""The SIF file's own bytes around its data: the global header and the object descriptors
(sylabs/sif's layout: little-endian, packed). `apptainer sif new` and `sif add` write the
day's time, the user's IDs and a random image ID there, so two packings of the same objects
differ; `stamp` puts fixed values in their place, as Apptainer 1.5's `--reproducible` does.

    stamp(Path("images/cpu.sif"), 1767225600)  # times: the build's; ID: from the objects' bytes
    objects_digest(Path("published/image.sif"))  # the same for a signed copy of the image
"""

import hashlib
import struct
import uuid
from dataclasses import dataclass
from pathlib import Path

from ..errors import ToolError

MAGIC = b"SIF_MAGIC\0"
# launch line, magic, version, arch, ID; created, modified, descriptors free, total, offset,
# size; data offset, size
HEADER = struct.Struct("<32s10s3s3s16s8q")
# data type, used, ID, group, link; offset, size, size with padding, created, modified, UID,
# GID; name, type-specific fields
DESCRIPTOR = struct.Struct("<i?III7q128s384s")
SIGNATURE = 0x4005  # a signature object: `apptainer sign` adds it after the build
CHUNK = 1 << 20


@dataclass(frozen=True)
class DataObject:
    """One used descriptor: where its descriptor is and where its bytes are."""

    index: int  # of the descriptor in the table
    datatype: int
    offset: int
    size: int


def objects(image: Path) -> list:
    """The image's data objects in descriptor order; one line where the file is no SIF."""
    with open(image, "rb") as sif:
        header = _header(sif, image)
        sif.seek(header[9])
        table = sif.read(header[8] * DESCRIPTOR.size)
    found = []
    for index in range(header[8]):
        fields = DESCRIPTOR.unpack_from(table, index * DESCRIPTOR.size)
        if fields[1]:
            found.append(DataObject(index, fields[0], fields[5], fields[6]))
    return found


def objects_digest(image: Path) -> str:
    """sha256 over each object's type and bytes, signatures left out: the same for an image
    and a signed copy of it, whatever their headers say."""
    total = hashlib.sha256()
    with open(image, "rb") as sif:
        for found in objects(image):
            if found.datatype != SIGNATURE:
                total.update(f"{found.datatype:x} {_object_sha256(sif, found)}\n".encode())
    return total.hexdigest()


def stamp(image: Path, when: int):
    """Set the header's and every descriptor's times to ``when``, the descriptors' owners to
    0, and the image ID to one made from the objects' bytes (a UUID of version 5's form)."""
    image_id = uuid.UUID(bytes=bytes.fromhex(objects_digest(image))[:16], version=5).bytes
    with open(image, "r+b") as sif:
        header = list(_header(sif, image))
        header[4], header[5], header[6] = image_id, when, when
        sif.seek(0)
        sif.write(HEADER.pack(*header))
        for found in objects(image):
            where = header[9] + found.index * DESCRIPTOR.size
            sif.seek(where)
            fields = list(DESCRIPTOR.unpack(sif.read(DESCRIPTOR.size)))
            fields[8:12] = [when, when, 0, 0]
            sif.seek(where)
            sif.write(DESCRIPTOR.pack(*fields))


def _header(sif, image: Path) -> tuple:
    raw = sif.read(HEADER.size)
    if len(raw) < HEADER.size or raw[32:42] != MAGIC:
        raise ToolError(f"{image}: not a SIF file (no {MAGIC[:-1].decode()} in its header)")
    return HEADER.unpack(raw)


def _object_sha256(sif, found: DataObject) -> str:
    digest, left = hashlib.sha256(), found.size
    sif.seek(found.offset)
    while left:
        chunk = sif.read(min(CHUNK, left))
        if not chunk:
            raise ToolError(f"{sif.name}: object at {found.offset} runs past the end of the file")
        digest.update(chunk)
        left -= len(chunk)
    return digest.hexdigest()
