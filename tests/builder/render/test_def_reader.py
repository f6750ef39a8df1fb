"""render.def_reader: a written definition read back as `apptainer build` reads it, for the
build that runs the steps itself (layerbuild/unpacked.py): stages, headers, %files with and
without a stage, %labels, build arguments, and one line for what it does not run."""

import pytest
from conftest import ROOT

from builder.errors import ToolError
from builder.render import def_reader

LUMI_LAIF = (ROOT / "containers" / "lumi-laif.def").read_text()


def test_the_site_image_definition_reads_back_as_two_stages_from_the_image():
    build, final = def_reader.stages(def_reader.substituted(LUMI_LAIF, {"RUNTIME_WHEEL": "/w/r.whl"}))
    assert (build.name, final.name) == ("build", "final")
    for stage in (build, final):
        assert stage.header["bootstrap"] == "localimage" and stage.header["from"].startswith("/appl/local/laifs/")
    assert build.files() == (("/w/r.whl", "/opt/hpcml-runtime/hpc_ml_runtime-0.1.0-py3-none-any.whl"),)
    assert final.from_stages() == ("build",) and final.files("build") == (("/opt/venv", "/opt/venv.new"),)
    assert final.files() == () and build.script("test") == ""
    assert "echo '--- build: deepspeed'" in build.script("post") and "IMAGE_JSON" in build.script("post")
    assert final.labels()["org.hpc-ml-containers.target"] == "lumi-laif"
    assert final.script("environment").startswith("export NCCL_SOCKET_IFNAME=hsn0")


def test_a_build_argument_no_one_gave_is_one_line():
    with pytest.raises(ToolError) as error:
        def_reader.substituted("Bootstrap: localimage\nFrom: {{ BASE }}\n", {})
    assert str(error.value) == "the definition asks for build arguments no one gave: BASE"
    assert def_reader.substituted("From: {{BASE}}\n", {"BASE": "b.sif"}) == "From: b.sif\n"


def test_a_section_that_needs_the_host_is_refused_in_one_line():
    with pytest.raises(ToolError) as error:
        def_reader.stages("Bootstrap: localimage\nFrom: x.sif\n\n%setup\ntouch $APPTAINER_ROOTFS/x\n")
    assert "%setup section: not run by a build without Apptainer" in str(error.value)
    assert "\n" not in str(error.value)


def test_files_lines_labels_and_comments_as_apptainer_splits_them():
    text = (
        "# a comment\nBootstrap: localimage\nFrom: a.sif  # the base\nStage: one\n\n%files\n"
        '# not a file\n/etc/motd\n"/src/x" /dst/x\n\n%labels\nname  some value \n# not a label\n'
    )
    (stage,) = def_reader.stages(text)
    assert stage.header == {"bootstrap": "localimage", "from": "a.sif", "stage": "one"}
    assert stage.files() == (("/etc/motd", "/etc/motd"), ("/src/x", "/dst/x"))
    assert stage.labels() == {"name": "some value"}
    assert def_reader.label_lines("a.b 1\nc\n") == {"a.b": "1", "c": ""}
