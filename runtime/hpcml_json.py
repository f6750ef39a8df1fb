"""How each record of hpcml_facts and hpcml_report reads its JSON back: a key of the type it
must have, or FactsError, one line naming the file, the key and what was expected. Kept apart
so that the records of each file share one reading rule. Standard library only.

Example: take({"nodes": 2}, "nodes", (int,), "site facts: allreduce[0]") -> 2
"""


class FactsError(ValueError):
    pass


def take(data, key, kinds, where, default=None):
    """data[key] when it is one of ``kinds`` (None allowed where default is None and absent)."""
    if not isinstance(data, dict):
        raise FactsError(f"{where}: expected a JSON object")
    value = data.get(key, default)
    if value is default or isinstance(value, kinds):
        return value
    raise FactsError(f"{where}: {key}: expected {' or '.join(kind.__name__ for kind in kinds)}, not {value!r}")


def strings(data, key, where) -> tuple:
    """data[key] as a tuple of strings (empty when absent)."""
    values = take(data, key, (list,), where, default=[])
    if not all(isinstance(value, str) for value in values):
        raise FactsError(f"{where}: {key}: expected a list of strings")
    return tuple(values)


def without_empty(data: dict) -> dict:
    """``data`` less the keys whose value says nothing (None, empty): the JSON stays short."""
    return {key: value for key, value in data.items() if value not in (None, (), [], {})}
