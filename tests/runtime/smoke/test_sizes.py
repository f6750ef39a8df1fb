"""smoke.sizes: message sizes and sweeps read as nccl-tests reads them; the ones it refuses."""

import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "runtime"))
from smoke import sizes  # noqa: E402


@pytest.mark.parametrize(
    "text, expected",
    [
        ("8:64", [8, 16, 32, 64]),
        ("1K:4K", [1024, 2048, 4096]),
        ("8:100", [8, 16, 32, 64]),
        ("128M", [134217728]),
        ("256MiB", [268435456]),
        ("2G,1K,1K", [1024, 2147483648]),
    ],
)
def test_sweeps_read_like_nccl_tests(text, expected):
    assert sizes.parse_sweep(text) == expected


@pytest.mark.parametrize("bad", ["", "0", "8:4", "12X", "-8", "8:", "1.5M"])
def test_bad_sizes_are_refused(bad):
    with pytest.raises(sizes.SizeError):
        sizes.parse_sweep(bad)
