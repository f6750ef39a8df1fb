"""A small stand-in for the CUDA images' MPI (issue 47): the CUDA targets' own Bootstrap lines
(debootstrap of Debian trixie, as containers/a100-cuda.base.def renders them), the MPI package
their mpi block installs (openmpi-bin: Open MPI 5.0.x, on Debian's PMIx) and mpi4py from the
same suite (the images take mpi4py's wheel from PyPI; both load the image's libmpi, which is
what a launcher meets). No torch, no CUDA: about two minutes to build (160 MB) instead of
hours. Kept in the user's cache under a hash of its definition, so a rerun takes it in seconds.

The runtime's launchenv is not in it: the tests bind the checkout's runtime/ in and put it on
the container's PYTHONPATH (apptainer's APPTAINERENV_ variables)."""

from conftest import CONTAINERS
from helpers import cached_image, deffile

from builder.render.blocks import mpi

# the layer of the CUDA images that installs their MPI from the distribution
ROUTE = deffile.split((CONTAINERS / "a100-cuda.base.def").read_text())[-1]
PACKAGES = (*mpi.PACKAGES["openmpi"], "python3", "python3-mpi4py", "python-is-python3")
# the series the CUDA images' Open MPI belongs to (trixie's), which the image's %test holds
SERIES = "Open MPI v5.0."


def definition() -> str:
    header = {key: value for key, value in ROUTE.header.items() if key != "Stage"}
    assert header.get("OSVersion") == "trixie", header
    return (
        "\n".join(f"{key}: {value}" for key, value in header.items())
        + "\n\n%post\nset -eu\nexport DEBIAN_FRONTEND=noninteractive\napt-get update\n"
        f"apt-get install -y --no-install-recommends {' '.join(PACKAGES)}\napt-get clean\n"
        "rm -rf /var/lib/apt/lists/*\n\n%test\nset -eu\n"
        "python -c 'import sys; from mpi4py import MPI; found = MPI.Get_library_version(); "
        "assert found.startswith(sys.argv[1]), found' " + f"'{SERIES}'\n"
    )


def ready(apptainer):
    """The image's path, built first when the cache lacks it (the seconds it took on stderr)."""
    text = definition()
    image = cached_image.path_for("trixie-mpi", text)
    if image.is_file():
        return image
    return cached_image.build(apptainer, image, text, 1200, "trixie Open MPI stand-in image")
