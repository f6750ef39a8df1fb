"""One mapping of a recipe file and where it sits in the file: a model part reads its own keys
from here and reports a value the schema cannot judge at that value's line."""


class Section:
    def __init__(self, source, data: dict, path: tuple = ()):
        self.source = source  # the Document (or a target's merge Origin) it came from
        self.data = data
        self.path = tuple(path)

    def __getitem__(self, key):
        return self.data[key]

    def __contains__(self, key):
        return key in self.data

    def get(self, key, default=None):
        return self.data.get(key, default)

    def part(self, key) -> "Section":
        """The mapping under ``key``; empty when the file leaves it out."""
        return Section(self.source, self.data.get(key) or {}, self.path + (key,))

    def error(self, where: tuple, message: str):
        """A RecipeError at ``where``, a key path below this section: () for the section."""
        return self.source.error(self.path + tuple(where), message)
