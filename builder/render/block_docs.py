"""docs/blocks.md: every building block's reference, generated from the block's own
docstring (what it emits, what it reads from the target and its sites, an example), in the
order the blocks run; as hpccm generates its building blocks' docs from theirs.

`python -m builder.render.block_docs` writes it; tests/docs/test_block_docs.py fails when the
file is not what the blocks say, so a block and its reference change together.
"""

import inspect
import sys
from pathlib import Path

from ..fileio import write_atomic
from . import blocks

DOC = Path(__file__).resolve().parents[2] / "docs" / "blocks.md"
HEADER = """# Building blocks

Generated from each block's docstring (`builder/render/blocks/<block>.py`) by
`python -m builder.render.block_docs`; edit the block, not this page. What a block is and how a
recipe reaches it: [recipes.md](recipes.md); how blocks become a definition:
[design.md](design.md#data-flow). A target with locks (recipes/locks/<target>/) installs its
apt and pip packages at the locked versions: [reproducibility.md](reproducibility.md).

In the order they run: build_host and os open each layer, then come the base layers' blocks
(devel and base images), then the top layer's; a site-image target runs `site_image` and the
top layer's blocks on the site's own image.
"""


def in_order() -> list:
    """The block modules, in %post order (blocks/__init__.py), each once."""
    ordered = [
        blocks.build_host,
        blocks.os_packages,
        *blocks.BASE_BLOCKS,
        *blocks.TOP_BLOCKS,
        *blocks.SITE_IMAGE_BLOCKS,
    ]
    return list(dict.fromkeys(ordered))


def section(module) -> str:
    name = blocks.block_name(module)
    summary, _, rest = inspect.getdoc(module).partition("\n")
    return f"## `{name}`\n\n{summary}\n{rest}\n"


def render() -> str:
    contents = "\n".join(f"- [`{blocks.block_name(m)}`](#{blocks.block_name(m)})" for m in in_order())
    return HEADER + "\n" + contents + "\n\n" + "\n".join(section(module) for module in in_order())


def main():
    changed = write_atomic(DOC, render())
    print(f"{'wrote' if changed else 'unchanged'} {DOC.relative_to(DOC.parents[1])}", file=sys.stderr)


if __name__ == "__main__":
    main()
