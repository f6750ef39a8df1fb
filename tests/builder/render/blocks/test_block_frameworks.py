"""The frameworks block alone, on targets of the test's own (tests/helpers/mini_target.py)."""

from helpers.mini_target import cuda_changes, mini_target, site_image_target

from builder.render.blocks import frameworks

CONSTRAINTS = "/opt/venv/share/hpc-ml-runtime/constraints.txt"


def test_a_cpu_image_goes_without_unless_its_recipe_asks(tree):
    assert frameworks.parts(mini_target(tree)) == []
    assert frameworks.parts(mini_target(tree, {"python": {"frameworks": True}})) != []


def test_a_gpu_image_installs_the_pinned_frameworks_under_the_venvs_constraints(tree):
    build, final = frameworks.parts(mini_target(tree, cuda_changes(), sites=("mahti",)))
    pins = [f"{name}=={version}" for name, version in tree.versions.data["frameworks"].items()]
    assert [(p.block, p.stage, p.packages) for p in (build, final)] == [
        ("frameworks", "build", ()),
        ("frameworks", "final", ()),
    ]
    assert any(line.endswith(f"> {CONSTRAINTS}") for line in build.post)
    (install,) = [line for line in build.post if line.startswith("if ! pip install")]
    assert f"-c {CONSTRAINTS} {' '.join(pins)}; then" in install
    assert final.test == (
        f"python -m smoke.imports {' '.join(pins)}",
        "pip check",
        f"python -m smoke.pins {CONSTRAINTS}",
    )


def test_pip_check_lets_through_only_the_wheels_the_recipe_names_mistagged(tree):
    changes = {**cuda_changes(), "python": {"mistagged": {"nvidia-cusparselt-cu13": "tagged manylinux2014_sbsa"}}}
    _build, final = frameworks.parts(mini_target(tree, changes, sites=("mahti",)))
    assert "pip check" not in final.test
    (allowed,) = [line for line in final.test if "grep -vxE" in line]
    assert "'(nvidia-cusparselt-cu13) [^ ]+ is not supported on this platform'" in allowed


def test_on_a_site_image_only_the_frameworks_it_lacks_go_in_and_its_own_are_tested_unpinned(tree):
    build, final = frameworks.parts(site_image_target(tree))
    names = list(tree.versions.data["frameworks"])
    assert any(line.startswith("for pin in ") and "pip show" in line for line in build.post)
    assert final.test[0] == f"python -m smoke.imports {' '.join(names)}"
