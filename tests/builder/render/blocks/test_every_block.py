"""Each block has a test of its own here, that calls it on a target of the test's own."""

from pathlib import Path

from conftest import ROOT

BLOCKS = ROOT / "builder" / "render" / "blocks"


def test_every_block_has_a_test_file_that_calls_it():
    missing = []
    for block in sorted(path.stem for path in BLOCKS.glob("*.py") if path.stem != "__init__"):
        test = Path(__file__).with_name(f"test_block_{block}.py")
        if not test.exists() or f"{block}.parts(" not in test.read_text():
            missing.append(block)
    assert not missing, f"blocks without a test of their own: {missing}"
