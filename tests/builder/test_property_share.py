"""`make unit` draws a share of each property test's examples, `make test` all of them
(helpers/property_share.py)."""

import pytest
from helpers import property_share


def test_the_full_run_draws_each_tests_own_count(monkeypatch):
    monkeypatch.setattr(property_share, "SHARE", 1.0)
    assert [property_share.examples(n) for n in (5, 40, 150)] == [5, 40, 150]


def test_a_share_draws_fewer_but_never_under_the_floor(monkeypatch):
    monkeypatch.setattr(property_share, "SHARE", 0.25)
    assert [property_share.examples(n) for n in (5, 40, 150)] == [10, 10, 38]


@pytest.mark.parametrize("raw", ["0", "1.5", "quarter", "-0.2"])
def test_a_share_out_of_range_is_one_line(monkeypatch, raw):
    monkeypatch.setenv("PROPERTY_SHARE", raw)
    with pytest.raises(SystemExit, match=r"^PROPERTY_SHARE is '.*': expected a number above 0 and at most 1$"):
        property_share._share()


def test_make_unit_draws_a_quarter():
    from conftest import ROOT

    unit = ROOT.joinpath("Makefile").read_text().split("\nunit:", 1)[1].split("\n\n", 1)[0]
    assert "PROPERTY_SHARE=0.25 $(PYTEST)" in unit
