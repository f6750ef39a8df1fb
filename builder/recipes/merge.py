"""How a target that `extends:` another is combined with it.

Rules (documented in docs/recipes.md and tested in tests/builder/recipes/test_merge.py):
1. Mappings merge key by key, recursively; a key only in the base is kept.
2. Every other value (text, number, boolean, list) in the child replaces the base's value
   whole; lists are never concatenated, so a child can always shorten one.
3. `extends` chains are followed to the root; a cycle is an error.
4. `extends` itself and nothing else is dropped from the result.
"""


class Origin:
    """Which document each key path of merged data came from, for error messages."""

    def __init__(self, doc):
        self.docs = {(): doc}

    def doc_for(self, path):
        path = tuple(path)
        while path not in self.docs:
            path = path[:-1]
        return self.docs[path]

    def error(self, path, message):
        return self.doc_for(path).error(path, message)


def merge(base, origin, child, child_doc, path=()):
    """Return ``base`` with ``child`` laid over it; record child keys in ``origin``."""
    out = dict(base)
    for key, value in child.items():
        here = path + (key,)
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], origin, value, child_doc, here)
        else:
            out[key] = value
            _claim(origin, here, child_doc)
    return out


def _claim(origin, path, doc):
    for known in [p for p in origin.docs if p[: len(path)] == path]:
        del origin.docs[known]
    origin.docs[path] = doc
