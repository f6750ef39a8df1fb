"""The python block alone, on targets of the test's own (tests/helpers/mini_target.py)."""

from helpers.mini_target import mini_target

from builder.render.blocks import python


def test_the_venv_is_made_in_build_with_the_pinned_build_tools(tree):
    build, _final = python.parts(mini_target(tree))
    pins = tree.versions.data["python_packages"]
    assert (build.block, build.stage) == ("python", "build")
    assert {"python3", "python3-venv", "python3-dev"} <= set(build.packages)
    assert build.build_env == (("VIRTUAL_ENV", "/opt/venv"), ("PATH", "/opt/venv/bin:${PATH}"))
    assert build.post[0] == "python3 -m venv /opt/venv"
    for tool in ("setuptools", "wheel", "ninja"):
        assert f"{tool}=={pins[tool]}" in build.post[1]


def test_the_final_stage_copies_the_venv_puts_it_first_and_checks_it(tree):
    _build, final = python.parts(mini_target(tree))
    assert (final.stage, final.packages, final.copy_from_build) == (
        "final",
        ("ca-certificates", "python3"),
        ("/opt/venv",),
    )
    assert dict(final.env)["VIRTUAL_ENV"] == "/opt/venv"
    assert final.test[0].endswith(" /opt/venv")  # the check's expected sys.prefix
    assert final.runscript[-1] == 'exec "$@"'


def test_the_recipes_venv_is_the_one_made_copied_and_checked(tree):
    build, final = python.parts(mini_target(tree, {"python": {"venv": "/opt/other"}}))
    assert build.post[0] == "python3 -m venv /opt/other"
    assert final.copy_from_build == ("/opt/other",) and final.test[0].endswith(" /opt/other")
    assert dict(final.env)["PATH"] == "/opt/other/bin:${PATH}"
