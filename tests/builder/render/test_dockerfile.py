"""A user's Dockerfile as an extra layer's steps (render.dockerfile, spython's parser) and the
definition `hpcml extend` renders from them; the real build on the CPU image is in
tests/builder/layerbuild/test_extend.py."""

import pytest
from conftest import RECIPES, recipe_tree

from builder.errors import RecipeError
from builder.recipes.tree import RecipeTree
from builder.render import dockerfile
from builder.render.definition import render_extension

TARGET = recipe_tree().target("cpu")
PROJECT = """\
FROM anything:latest
# comments and blank lines are skipped

ARG EPOCHS=2
ENV HF_HOME=/scratch/hf GREETING="hello there"
RUN pip install --no-deps einops==0.8.1 && \\
    echo "$GREETING for $EPOCHS epochs" > /opt/greeting
COPY train.py data/ /opt/project/
WORKDIR /opt/project
LABEL maintainer="A. User" purpose=demo
EXPOSE 8080
CMD ["python", "train.py"]
"""


def project(tmp_path, text=PROJECT):
    (tmp_path / "train.py").write_text("print('training')\n")
    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "data" / "x.txt").write_text("x\n")
    path = tmp_path / "Dockerfile"
    path.write_text(text)
    return path


def test_the_steps_keep_their_order_and_env_and_arg_are_exported_for_later_runs(tmp_path):
    steps = dockerfile.read(project(tmp_path))
    assert steps.env == ("HF_HOME=/scratch/hf", 'GREETING="hello there"')
    assert steps.post[:3] == ("export EPOCHS=2", "export HF_HOME=/scratch/hf", 'export GREETING="hello there"')
    assert "pip install --no-deps einops==0.8.1 && \\" in steps.post
    assert steps.post[-2:] == ("mkdir -p /opt/project", "cd /opt/project")
    assert steps.files == (("train.py", "/opt/project/"), ("data/", "/opt/project/"))
    assert steps.labels == (("maintainer", "A. User"), ("purpose", "demo"))
    assert steps.runscript == ("cd /opt/project", 'exec python train.py "$@"')


def test_spython_reads_each_step_once(tmp_path):
    """Its parser's constructor parses already: parse() after it would double every step."""
    steps = dockerfile.read(project(tmp_path))
    assert len(steps.files) == 2 and steps.post.count("export EPOCHS=2") == 1


def test_the_definition_starts_from_the_image_with_its_venv_first_and_checks_the_stack(tmp_path):
    steps = dockerfile.read(project(tmp_path))
    plan = render_extension(TARGET, "cpu-project", steps, "Dockerfile", "cpu-project.context")
    text = plan.text
    assert "Bootstrap: localimage\nFrom: {{ BASE }}\n" in text and plan.build_args == ("BASE",)
    assert "%files\ncpu-project.context/train.py /opt/project/\ncpu-project.context/data/ /opt/project/\n" in text
    post = text.split("%post\n", 1)[1].split("\n%", 1)[0].splitlines()
    assert post[:5] == [
        "set -eu",
        "echo '--- extend: the steps of Dockerfile'",
        "set +u",
        "export VIRTUAL_ENV=/opt/venv",
        'export PATH="/opt/venv/bin:${PATH}"',
    ]
    assert '%environment\nexport HF_HOME=/scratch/hf\nexport GREETING="hello there"\n' in text
    assert "%test\nset -eu\n/opt/venv/bin/python -c 'import torch, deepspeed, mpi4py'\n" in text
    assert "org.hpc-ml-containers.extended.from cpu\n" in text
    assert plan.file_name == "cpu-project.def"
    assert render_extension(TARGET, "cpu-project", steps, "Dockerfile", "cpu-project.context").text == text


@pytest.mark.parametrize(
    "line, message",
    [
        ("USER nobody", ":3: USER is not taken in an extra layer: Apptainer runs the container as the user"),
        ("FROM other", ":3: a second FROM: an extra layer is one stage"),
        ("ADD https://example.invalid/x.tgz /opt/", ":3: ADD of a URL: fetch it in a RUN step instead"),
        ("COPY --from=builder /x /y", ":3: COPY --from=builder: only plain COPY SOURCE... DEST"),
        ("ARG EPOCHS", ":3: ARG without a default"),
        ("FROBNICATE now", ":3: FROBNICATE: not an instruction an extra layer takes"),
        ("COPY missing.py /opt/", ": COPY missing.py: no such file beside the Dockerfile"),
        ("COPY ../secret /opt/", ": COPY ../secret: expected a path inside the Dockerfile's folder"),
    ],
)
def test_a_step_the_layer_cannot_take_is_one_located_error(tmp_path, line, message):
    path = project(tmp_path, f"FROM x\nRUN true\n{line}\n")
    with pytest.raises(RecipeError) as caught:
        dockerfile.read(path)
    assert str(caught.value).startswith(str(path)) and message in str(caught.value), str(caught.value)


def test_a_missing_dockerfile_is_one_line(tmp_path):
    with pytest.raises(RecipeError, match="Dockerfile: cannot read the Dockerfile"):
        dockerfile.read(tmp_path / "Dockerfile")


def test_spython_reads_our_docker_layers_as_the_plan_describes_them_and_refuses_the_rest():
    """An independent reading of containers/: where a layer bootstraps from a docker image
    in every stage (the LUMI devel layers), spython's Singularity parser reads the file, and
    its image and %post are the ones render's plan hands the build. A layer with a stage from
    debootstrap, localimage or scratch spython 0.3.14 refuses ("Only docker is
    supported"): a newer spython that reads them fails this test, to be used there too."""
    from spython.main.parse.parsers import SingularityParser

    from builder.render.layer_sharing import plan_layers

    tree, read = RecipeTree(RECIPES), 0
    for name in sorted(tree.targets):
        for plan in plan_layers(tree, name).values():
            path = RECIPES.parent / "containers" / plan.file_name
            if plan.owner != name or not path.is_file():
                continue  # a shared layer: read under its owner
            if plan.text.count("\nBootstrap: ") != plan.text.count("\nBootstrap: docker\n"):  # a stage of another kind
                with pytest.raises(NotImplementedError, match="Only docker is supported"):
                    SingularityParser(str(path))
                continue
            stages = SingularityParser(str(path)).recipe
            assert tuple(stage.fromHeader for stage in stages.values()) == plan.base_images, path
            post = [line for stage in stages.values() for line in stage.install]  # spython strips indents
            ours = [line.strip() for line in plan.text.split("%post\n", 1)[1].split("\n%", 1)[0].splitlines()]
            assert post == [line for line in ours if line], path
            read += 1
    assert read >= 2  # lumi-rocm's and lumi-rocm64's devel layers


def test_an_extension_name_with_a_trailing_newline_is_refused_in_one_line(tree, tmp_path):
    from builder.errors import RecipeError
    from builder.render.extension import plan_extension

    (tmp_path / "Dockerfile").write_text("RUN true\n")
    with pytest.raises(RecipeError) as refused:
        plan_extension(tree, tree.target("cpu"), tmp_path / "Dockerfile", name="cpu-x\n")
    assert str(refused.value).startswith("command line: --name 'cpu-x\\n': expected a new image name")
