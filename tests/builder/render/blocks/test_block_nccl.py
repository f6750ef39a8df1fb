"""The nccl block alone, on targets of the test's own (tests/helpers/mini_target.py)."""

from helpers.mini_target import cuda_changes, mini_target

from builder.render.blocks import nccl


def test_a_gloo_image_gets_nothing_from_the_nccl_block(tree):
    assert nccl.parts(mini_target(tree)) == []


def test_an_nccl_image_checks_in_its_final_stage_that_torch_finds_nccl(tree):
    (part,) = nccl.parts(mini_target(tree, cuda_changes(), sites=("mahti",)))
    assert (part.block, part.stage, part.packages) == ("nccl", "final", ())
    assert "torch.cuda.nccl.version()" in part.test[0]
