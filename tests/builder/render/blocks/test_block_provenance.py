"""The provenance block alone, on targets of the test's own (tests/helpers/mini_target.py)."""

import json

from helpers.mini_target import cuda_changes, mini_target

from builder.labels import LABEL_PREFIX
from builder.render.blocks import provenance


def labels_of(part) -> dict:
    return {key.removeprefix(f"{LABEL_PREFIX}."): value for key, value in part.labels}


def test_a_cpu_image_is_labelled_with_its_target_sites_pins_and_recipe(tree):
    target = mini_target(tree)
    (part,) = provenance.parts(target)
    labels = labels_of(part)
    assert (part.block, part.stage, part.packages) == ("provenance", "final", ())
    assert (labels["target"], labels["sites"], labels["gpu.arch"]) == ("mini", "local", "none")
    build = target.stage("build")
    assert labels["image.build"] == f"debootstrap:{build.image}" and build.bootstrap == "debootstrap"
    assert labels["version.torch"] == target.torch.version and labels["version.deepspeed"] == target.deepspeed.version
    assert labels["deepspeed.ops"] == ",".join(target.deepspeed.promised)
    # the embedded recipe is the one the hash names
    assert json.loads(labels["recipe"]) == target.resolved and labels["recipe.sha256"] == provenance.recipe_hash(target)


def test_the_build_hosts_mirror_label_is_dropped_and_a_cpu_image_measures_nothing(tree):
    (part,) = provenance.parts(mini_target(tree))
    (drop,) = part.post
    assert drop.startswith("[ ! -f /.singularity.d/labels.json ] || /opt/venv/bin/python -c ")
    assert "org.label-schema.usage.singularity.deffile.mirrorurl" in drop


def test_a_gpu_image_names_its_sites_archs_and_adds_the_measured_labels(tree):
    (part,) = provenance.parts(mini_target(tree, cuda_changes(), sites=("mahti", "jean-zay-h100")))
    labels = labels_of(part)
    assert (labels["sites"], labels["gpu.arch"]) == ("mahti,jean-zay-h100", "sm_80,sm_90")
    assert any("smoke.labels" in line for line in part.post)
    assert "GPU arch: sm_80, sm_90." in part.help[1]


def test_mpi4py_and_the_extra_packages_are_pinned_in_the_labels(tree):
    target = mini_target(tree, {"mpi": {"mpi4py": True}, "python": {"packages": ["numpy"]}})
    labels = labels_of(provenance.parts(target)[0])
    pins = tree.versions.data["python_packages"]
    assert (labels["version.mpi4py"], labels["version.numpy"]) == (pins["mpi4py"], pins["numpy"])
    assert "version.mpi4py" not in labels_of(provenance.parts(mini_target(tree))[0])
