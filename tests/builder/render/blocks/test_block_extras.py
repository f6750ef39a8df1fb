"""The extras block alone, on targets of the test's own (tests/helpers/mini_target.py)."""

from helpers.mini_target import mini_target

from builder.render.blocks import extras


def test_no_extra_package_no_part(tree):
    assert extras.parts(mini_target(tree)) == []


def test_each_extra_package_is_installed_at_its_versions_yaml_pin(tree):
    (part,) = extras.parts(mini_target(tree, {"python": {"packages": ["numpy"]}}))
    pin = tree.versions.data["python_packages"]["numpy"]
    assert (part.block, part.stage) == ("extras", "build")
    assert part.post == (f"pip install --no-cache-dir numpy=={pin}",)
