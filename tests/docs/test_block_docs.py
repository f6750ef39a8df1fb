"""docs/blocks.md is what the blocks' own docstrings say (builder/render/block_docs.py), so a
block's reference changes with the block."""

from conftest import ROOT

from builder.render import block_docs, blocks


def test_blocks_md_is_generated_from_the_blocks_as_they_are():
    assert block_docs.DOC == ROOT / "docs" / "blocks.md"
    assert block_docs.DOC.read_text() == block_docs.render(), "stale: run python -m builder.render.block_docs"


def test_every_block_has_its_section_with_what_it_emits_reads_and_an_example():
    text = block_docs.render()
    for module in block_docs.in_order():
        name = blocks.block_name(module)
        section = text.split(f"## `{name}`\n", 1)[1].split("\n## ", 1)[0]
        assert f'Emits: "{name}"' in section and "Reads: " in section and "\n    " in section, name
