"""The site_image block alone, on targets of the test's own (tests/helpers/mini_target.py)."""

from helpers.mini_target import mini_target, site_image_target

from builder.render.blocks import site_image


def test_a_target_built_from_scratch_gets_nothing(tree):
    assert site_image.parts(mini_target(tree)) == []


def test_the_build_stage_checks_the_bases_torch_and_adds_only_the_build_tools_it_lacks(tree):
    build, _final = site_image.parts(site_image_target(tree))
    pins = tree.versions.data["python_packages"]
    assert (build.block, build.stage, build.packages) == ("site_image", "build", ())
    assert build.build_env == (
        ("VIRTUAL_ENV", "/opt/venv"),
        ("PATH", "/opt/venv/bin:${PATH}"),
        ("PYTORCH_ROCM_ARCH", "gfx90a"),
    )
    assert build.post[0].startswith("PYTHONPATH=") and " python -m smoke.baseimage rocm " in build.post[0]
    assert f"pip show ninja >/dev/null 2>&1 || pip install --no-cache-dir ninja=={pins['ninja']}" in build.post


def test_the_final_stage_keeps_the_bases_environment_measures_labels_and_names_the_image(tree):
    target = site_image_target(tree)
    _build, final = site_image.parts(target)
    assert final.post[0].startswith("if [ -f /.singularity.d/env/90-environment.sh ]; then cp ")
    # %post of the final stage has no venv on PATH: the base's python by its path
    assert final.post[1].startswith('measured="$(/opt/venv/bin/python -m smoke.baseimage rocm ')
    assert final.test[0].startswith("python -m smoke.baseimage rocm ")
    assert target.site_image.path in final.help[0]
    assert final.runscript == ()  # the base's stays
