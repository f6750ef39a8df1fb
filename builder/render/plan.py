"""What render hands the layer build: per layer, one frozen LayerPlan.

A plan carries the definition text and every fact the build needs about it, gathered while
the text was made (render.definition): the build arguments it uses, the layers it starts
from, its kept steps, the pip indexes it names, the docker images it bootstraps from and the
git URLs it fetches. The build never reads the text back.
"""

from dataclasses import dataclass

LAYERS = ("devel", "base", "image")  # in build order
FILE_SUFFIX = {"devel": ".devel.def", "base": ".base.def", "image": ".def"}
# the build arguments that name the layers a layer starts from: {argument: layer}
PARENT_ARGS = {"DEVEL": "devel", "BASE": "base"}
MIRROR_ARG = "MIRROR"  # a debootstrap stage's Debian mirror, a host fact
SECURITY_MIRROR_ARG = "SECURITY_MIRROR"  # its security archive's mirror, where the lock takes it


def in_order(plans: dict) -> list:
    """The layers of {layer: LayerPlan} in build order (a site-image target has the image's alone)."""
    return [layer for layer in LAYERS if layer in plans]


def file_name(target_name, layer):
    return target_name + FILE_SUFFIX[layer]


@dataclass(frozen=True)
class LayerPlan:
    """One layer to build. Example, cpu's image layer: layer "image", owner "cpu",
    build_args ("BASE", "DEVEL", "RUNTIME_WHEEL"), parents ("devel", "base"),
    kept ("deepspeed-wheel-840e81212beeb261",), pip_indexes (), base_images (), git_sources ().
    lumi-rocm's devel layer: base_images ("rocm/dev-ubuntu-24.04:7.0.2-complete",) and
    git_sources ("https://github.com/aws/aws-ofi-nccl.git", ...)."""

    layer: str  # devel | base | image
    owner: str  # the target whose layer it is (another's when shared)
    text: str  # the definition
    build_args: tuple = ()  # names of the build arguments the text uses, sorted
    parents: tuple = ()  # the layers it starts from, in the order their keys count
    kept: tuple = ()  # folder names of its kept steps (name-inputs hash)
    pip_indexes: tuple = ()  # web indexes its pip lines name, in order
    base_images: tuple = ()  # docker references its stages bootstrap from (Bootstrap: docker)
    git_sources: tuple = ()  # https git URLs its lines fetch, in order
    site_image: str = ""  # the site's image file both stages start from (a site-image target's one layer)
    apt_packages: tuple = ()  # what its apt-get installs on its stage's bootstrap, sorted (a lock's "asked")

    @property
    def file_name(self) -> str:
        return file_name(self.owner, self.layer)

    def parent_args(self) -> dict:
        """{build argument: layer} for the layers it starts from."""
        return {arg: layer for arg, layer in PARENT_ARGS.items() if layer in self.parents}
