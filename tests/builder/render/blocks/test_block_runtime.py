"""The runtime block's image.json alone, on targets of the test's own
(tests/helpers/mini_target.py): what an image promises follows its target."""

import json

from helpers.mini_target import cuda_changes, mini_target
from hpcml_facts import ImageFacts

from builder.render.blocks import runtime


def test_a_cpu_image_promises_no_gpu_and_its_cpu_ops(tree):
    target = mini_target(tree)
    facts = runtime.image_facts(target)
    assert (facts.target, facts.gpu, facts.comm.library) == ("mini", None, "gloo")
    assert facts.deepspeed.accelerator == "cpu" and facts.deepspeed.promised_ops == tuple(target.deepspeed.promised)


def test_a_cuda_image_promises_its_sites_arch_and_the_oldest_driver_of_each_cuda(tree):
    facts = runtime.image_facts(mini_target(tree, cuda_changes(), sites=("mahti",)))
    assert facts.gpu.archs == ("sm_80",) and facts.gpu.min_driver == dict(tree.versions.data["cuda_min_driver"])
    assert ImageFacts.from_json(facts.to_json(), "image.json") == facts  # what the image holds reads back


def test_the_build_stage_installs_the_checked_wheel_and_writes_image_json_into_the_venv(tree):
    target = mini_target(tree, {"python": {"venv": "/opt/env"}})
    build, final = runtime.parts(target)
    assert (build.block, build.stage, final.stage) == ("runtime", "build", "final")
    post = "\n".join(build.post)
    assert "sha256sum --check" in post and "--no-index" in post
    written = post.split("<<", 1)[1].split("\n", 1)[1].rsplit("\n", 1)[0]
    assert ImageFacts.from_json(json.loads(written), "image.json") == runtime.image_facts(target)
    assert "cat > /opt/env/share/hpc-ml-runtime/image.json <<" in post
    assert any("python -m smoke" in line for line in final.help)
