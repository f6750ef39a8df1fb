"""smoke.config: the site's facts, from the wrapper's HPCML_SITE_FACTS or a file, and the image's."""

import json
import subprocess
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "runtime"))
from smoke import config  # noqa: E402


def test_site_facts_come_from_the_wrapper_or_a_file(tmp_path):
    facts = {"site": "mahti", "network": {"transport": "ib"}, "allreduce": []}
    assert config.site(None, {}) == (None, {})  # nobody said: no references
    assert config.site(None, {"HPCML_SITE_FACTS": json.dumps(facts)}) == ("mahti", facts)
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(dict(facts, site="puhti")))
    assert config.site(path, {"HPCML_SITE_FACTS": json.dumps(facts)})[0] == "puhti"  # file first
    with pytest.raises(config.ConfigError, match=r"\$HPCML_SITE_FACTS:1: not valid JSON"):
        config.site(None, {"HPCML_SITE_FACTS": "{nope"})
    with pytest.raises(config.ConfigError, match="expected a JSON object with the site's name"):
        config.site(None, {"HPCML_SITE_FACTS": "[]"})


def test_the_facts_the_wrapper_carries_are_the_recipes_own(tree):
    """The site file's HPCML_SITE_FACTS, read back as bash reads it, is what the smoke suite
    gets; it matches the recipe (so a reference corrected there reaches the next run)."""
    lumi = tree.sites["lumi"]
    text = (ROOT / "wrappers" / "sites" / "lumi.sh").read_text()
    shown = subprocess.run(
        ["bash", "-c", f'{text}\nprintf %s "$HPCML_SITE_FACTS"'], capture_output=True, text=True, check=True
    ).stdout
    name, facts = config.site(None, {"HPCML_SITE_FACTS": shown})
    assert name == "lumi" and facts == lumi.smoke_facts
    assert facts["allreduce"][0]["busbw_gbs"] == 125 and facts["network"]["provider"] == "cxi"


def test_outside_an_image_nothing_is_promised():
    assert config.image()["deepspeed"]["promised_ops"] == []
