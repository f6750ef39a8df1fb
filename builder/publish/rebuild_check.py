"""`hpcml verify NAME/VERSION --rebuild IMAGE`: whether an image rebuilt from the same commit
and lock is the published one. First by sha256 (every route packs an image the same way,
layerbuild/packing.py), then by the SIF's data objects (a published image may carry a
signature the rebuild lacks), and only where both differ file by file, to name the files.

    check(apptainer, Path("/appl/ml/pytorch/2.13.0-cpu/image.sif"), Path("images/cpu.sif"))
    -> prints "images/cpu.sif: the same bytes as the published image (sha256 ...)" or raises CheckFailed
"""

from pathlib import Path

from ..errors import CheckFailed, RecipeError
from ..fileio import sha256_file
from ..host import sif_header
from ..sbom import rootfs

MAX_SHOWN = 8


def check(apptainer, published: Path, rebuilt: Path) -> None:
    if not rebuilt.is_file():
        raise RecipeError(f"{rebuilt}: no such image; expected the SIF file of a rebuild", file="command line")
    checksum = sha256_file(rebuilt)
    if checksum == sha256_file(published):
        print(f"{rebuilt}: the same bytes as the published image (sha256 {checksum})")
        return
    objects = sif_header.objects_digest(rebuilt)
    if objects == sif_header.objects_digest(published):
        print(
            f"{rebuilt}: the same definition, metadata and root file system as the published image "
            f"(data objects sha256 {objects}); the published file also carries a signature"
        )
        return
    listings = [rootfs.image_listing(apptainer, image, near=rebuilt) for image in (published, rebuilt)]
    differ = rootfs.differing(*listings)
    if differ:
        for path in differ[:MAX_SHOWN]:
            print(f"DIFFERS {path}")
        more = f" (and {len(differ) - MAX_SHOWN} more)" if len(differ) > MAX_SHOWN else ""
        raise CheckFailed(
            f"{rebuilt}: {len(differ)} of its files differ from the published image's{more}; "
            "rebuilt from another commit or lock, or a step that is not reproducible yet"
        )
    raise CheckFailed(
        f"{rebuilt}: the same {len(listings[0]):,} files as the published image (root file system "
        f"{rootfs.digest(listings[0])}), but not the same bytes: packed another way (another "
        "mksquashfs, or a builder before images were packed the same way on every route)"
    )
