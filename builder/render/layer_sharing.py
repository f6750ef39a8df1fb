"""Targets that build on another target's lower layers.

A target that `extends:` another, and whose devel and base definitions would differ from that
target's only in the generated header and in the GPU arch list exported while torch's wheel
installs (where it does nothing: the wheel is built already), builds on that target's devel
and base layers. Only its image layer is its own: there DeepSpeed compiles its ops for the
target's archs. So h100-cuda builds on a100-cuda's layers and csc-cuda on v100-cuda's: the
same OS, CUDA toolkit and torch, built and stored once.

    >>> render_layers(tree, "h100-cuda")["base"][0]
    'a100-cuda.base.def'
"""

import re

from .definition import LAYERS, file_name, render_all

LOWER = ("devel", "base")
_HEADER = re.compile(r"\A(?:#[^\n]*\n)+")
_ARCH_EXPORT = re.compile(r"^export (TORCH_CUDA_ARCH_LIST|PYTORCH_ROCM_ARCH)=.*$", re.M)


def _what_builds(text):
    """A definition less what does not change the layer it builds."""
    return _ARCH_EXPORT.sub(r"export \1=(archs)", _HEADER.sub("", text))


def layer_owner(tree, name) -> str:
    """The target whose devel and base layers `name` builds on: itself when it shares none."""
    name = tree.aliases.get(name, name)
    parent = tree.parent(name)
    if parent is None:
        return name
    own, theirs = render_all(tree.target(name)), render_all(tree.target(parent))
    if all(_what_builds(own[layer]) == _what_builds(theirs[layer]) for layer in LOWER):
        return layer_owner(tree, parent)
    return name


def render_layers(tree, name) -> dict:
    """{layer: (file name, definition text)} for what building `name` takes: its image layer,
    and the devel and base layers of the target it builds on (its own when it shares none)."""
    name = tree.aliases.get(name, name)
    owner = layer_owner(tree, name)
    if owner == name:
        texts = render_all(tree.target(name))
    else:
        lower = render_all(tree.target(owner))
        texts = {**{layer: lower[layer] for layer in LOWER},
                 "image": render_all(tree.target(name), devel_text=lower["devel"])["image"]}
    return {layer: (file_name(owner if layer in LOWER else name, layer), texts[layer]) for layer in LAYERS}
