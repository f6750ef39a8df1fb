"""smoke.groups: the subgroups the suite makes, as tensor and data parallelism make them."""

import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "runtime"))


def test_the_subgroups_are_made_as_tensor_and_data_parallelism_make_them():
    from smoke import groups

    made = dict(groups.plan(["n1", "n1", "n2", "n2"], [0, 1, 0, 1]))
    assert [name for name in made if name.startswith("new group")] == [
        f"new group {i} of all 4 ranks" for i in (1, 2, 3)
    ]
    assert made["the ranks on n1"] == [0, 1] and made["the ranks on n2"] == [2, 3]
    assert made["local rank 0 across nodes"] == [0, 2] and made["local rank 1 across nodes"] == [1, 3]
    one_node = dict(groups.plan(["n1", "n1"], [0, 1]))
    assert not [name for name in one_node if name.endswith("across nodes")]
