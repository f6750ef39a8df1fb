"""`hpcml verify NAME/VERSION --rebuild IMAGE`: whether an image rebuilt from the same commit
and lock holds the same files as the published one, all but the few builder.reproducible
declares (Apptainer's own labels and definition copy). The SIF files themselves differ even
then: their headers carry the build's time and a fresh UUID.

    check(apptainer, Path("/appl/ml/pytorch/2.13.0-cpu/image.sif"), Path("images/cpu.sif"))
    -> prints "the rebuild holds the same 51,204 files ..." or raises CheckFailed
"""

from pathlib import Path

from .. import reproducible
from ..errors import CheckFailed, RecipeError
from ..sbom import rootfs

MAX_SHOWN = 8


def check(apptainer, published: Path, rebuilt: Path) -> None:
    if not rebuilt.is_file():
        raise RecipeError(f"{rebuilt}: no such image; expected the SIF file of a rebuild", file="command line")
    listings = [rootfs.image_listing(apptainer, image, near=rebuilt) for image in (published, rebuilt)]
    differ = rootfs.differing(*listings)
    left_out = ", ".join(path for path, _ in reproducible.DECLARED)
    if differ:
        for path in differ[:MAX_SHOWN]:
            print(f"DIFFERS {path}")
        more = f" (and {len(differ) - MAX_SHOWN} more)" if len(differ) > MAX_SHOWN else ""
        raise CheckFailed(
            f"{rebuilt}: {len(differ)} of its files differ from the published image's{more}; "
            "rebuilt from another commit or lock, or a step that is not reproducible yet"
        )
    print(
        f"{rebuilt}: the rebuild holds the same {len(listings[0]):,} files as the published image "
        f"(root file system {rootfs.digest(listings[0])}; left out as declared: {left_out})"
    )
