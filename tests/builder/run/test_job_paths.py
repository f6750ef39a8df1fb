"""The paths pass alone (builder/run/job_paths.py): the program and the data a request names,
absolute from the folder the script is written in; and the image's lines. The scripts they
end up in: test_jobscript_paths.py."""

import dataclasses

import pytest

from builder.errors import RecipeError
from builder.run.job_paths import check_image, image_hint, paths_for, variable_checks
from builder.run.job_request import Request


def test_the_program_and_data_are_named_from_the_folder(tmp_path):
    (tmp_path / "train.py").write_text("")
    request = Request(
        program=("python", "-u", "train.py", "--epochs", "2"),
        binds=("data", "/scratch:/scratch:ro"),
        stage=("sets/a",),
        folder=str(tmp_path),
    )
    paths = paths_for(request)
    assert paths.program == (str(tmp_path / "train.py"), "--epochs", "2")
    assert paths.binds == (str(tmp_path / "data"), "/scratch:/scratch:ro")
    assert paths.stage == (str(tmp_path / "sets" / "a"),)
    assert paths.notes == ("dropped 'python -u' after --: each launch starts python itself",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        paths.program = ()


def test_a_module_is_kept_as_given_and_a_missing_script_is_refused(tmp_path):
    assert paths_for(Request(program=("-m", "smoke", "all"), folder=str(tmp_path))).program == ("-m", "smoke", "all")
    with pytest.raises(RecipeError, match=r"program gone\.py: no such file"):
        paths_for(Request(program=("gone.py",), folder=str(tmp_path)))


def test_an_image_in_a_site_variables_folder_is_checked_before_it_is_used(tree):
    checks = variable_checks("$SINGULARITY_ALLOWED_DIR/x.sif", tree.sites["jean-zay"])
    assert checks[0] == 'if [ -z "${SINGULARITY_ALLOWED_DIR:-}" ]; then' and checks[-1] == "fi"
    assert "submit the job from a login shell of jean-zay" in checks[1]
    assert variable_checks("/abs/x.sif", tree.sites["jean-zay"]) == ()


def test_the_missing_image_hint_names_what_puts_it_there(tree):
    local, cpu = tree.sites["local"], tree.target("cpu")
    assert image_hint(local, cpu, "pytorch/2.9-cpu") == "'(the module pytorch/2.9-cpu sets it)'"
    assert "build cpu" in image_hint(local, cpu, "")


def test_an_image_not_named_by_image_is_not_looked_into(tree, tmp_path):
    image = tmp_path / "cpu.sif"
    image.write_text("not an image")
    assert check_image("", str(image), tree.sites["local"], tree.target("cpu")) == ()
