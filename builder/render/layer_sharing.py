"""Targets that build on another target's lower layers, and the plan of a target's build.

A target that `extends:` another, and whose devel and base layers would hold the same parts
as that target's but for the GPU arch list (exported while torch's wheel installs, where it
does nothing: the wheel is built already), builds on that target's devel and base layers.
Only its image layer is its own: there DeepSpeed compiles its ops for the target's archs. So
h100-cuda builds on a100-cuda's layers and csc-cuda on v100-cuda's: the same OS, CUDA toolkit
and torch, built and stored once.

    >>> plan_layers(tree, "h100-cuda")["base"].file_name
    'a100-cuda.base.def'
"""

from dataclasses import replace

from . import runtime_wheel
from .definition import lower_layer_parts, render_all

LOWER = ("devel", "base")


def layer_owner(tree, name) -> str:
    """The target whose devel and base layers `name` builds on: itself when it shares none."""
    name = tree.aliases.get(name, name)
    parent = tree.parent(name)
    if parent is None:
        return name
    if lower_layer_parts(tree.target(name)) == lower_layer_parts(tree.target(parent)):
        return layer_owner(tree, parent)
    return name


def plan_layers(tree, name) -> dict:
    """{layer: LayerPlan} for what building `name` takes: its image layer, and the devel and
    base layers of the target it builds on (its own when it shares none). Made once per
    loaded tree, target and runtime wheel: `check` asks for each target's plan three times."""
    name = tree.aliases.get(name, name)
    key = (name, runtime_wheel.current().sha256)
    if key not in tree.plans:
        tree.plans[key] = _plan_layers(tree, name)
    return dict(tree.plans[key])


def _plan_layers(tree, name) -> dict:
    owner = layer_owner(tree, name)
    if owner == name:
        return render_all(tree.target(name))
    lower = render_all(tree.target(owner))
    image = render_all(tree.target(name), devel_text=lower["devel"].text)["image"]
    return {**{layer: lower[layer] for layer in LOWER}, "image": image}


def layer_owner_unlocked(tree, name) -> str:
    """layer_owner as the recipes alone decide it, whatever the locks say (hpcml lock reads it
    before the locks fit the recipes)."""
    name = tree.aliases.get(name, name)
    parent = tree.parent(name)
    if parent is None:
        return name
    unlocked = [replace(tree.target(n), python_lock=None) for n in (name, parent)]
    if lower_layer_parts(unlocked[0]) == lower_layer_parts(unlocked[1]):
        return layer_owner_unlocked(tree, parent)
    return name
