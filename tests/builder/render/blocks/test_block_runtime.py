"""The runtime block's image.json alone, on targets of the test's own
(tests/helpers/mini_target.py): what an image promises follows its target."""

from helpers.mini_target import cuda_changes, mini_target

from builder.facts import ImageFacts
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
