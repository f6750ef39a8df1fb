"""The build_host block alone, on targets of the test's own (tests/helpers/mini_target.py)."""

from helpers.mini_target import cuda_changes, mini_target

from builder.render.blocks import build_host
from builder.render.parts import HOST_SETTINGS


def test_both_stages_source_the_host_settings_only_when_they_are_there(tree):
    parts = build_host.parts(mini_target(tree))
    assert [(p.block, p.stage, p.packages) for p in parts] == [("build_host", "build", ()), ("build_host", "final", ())]
    for part in parts:
        assert part.post[-1] == f"if [ -r {HOST_SETTINGS} ]; then . {HOST_SETTINGS}; fi"
        # nothing of the host stays in the image: no environment, no labels
        assert (part.env, part.labels) == ((), ())


def test_it_reads_nothing_of_the_target_or_its_sites(tree):
    cuda = mini_target(tree, cuda_changes(), sites=("mahti",))
    assert build_host.parts(cuda) == build_host.parts(mini_target(tree))
