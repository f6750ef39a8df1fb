"""A matrix whose cases run one code path with different data: `make unit` runs the cases it
keeps, `make test` every case (the others carry the marker `broad`; docs/testing.md). The
data of every case is still checked in-process where a test file does so too."""

import pytest


def cases(matrix: dict, keep) -> list:
    """pytest.param per {id: (value, ...)} item, in order; an id outside ``keep`` is `broad`."""
    unknown = sorted(set(keep) - set(matrix))
    if unknown:
        raise ValueError(f"representative cases not in the matrix: {unknown}")
    return [
        pytest.param(*values, id=name, marks=() if name in keep else pytest.mark.broad)
        for name, values in matrix.items()
    ]
