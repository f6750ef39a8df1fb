"""smoke.config: the site's facts, from the wrapper's HPCML_SITE_FACTS or a file, and the image's."""

import json
import subprocess
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "runtime"))
from hpcml_facts import Network, SiteFacts  # noqa: E402
from smoke import config  # noqa: E402


def test_site_facts_come_from_the_wrapper_or_a_file(tmp_path):
    facts = {"site": "mahti", "network": {"transport": "ib"}, "allreduce": []}
    assert config.site(None, {}) == SiteFacts(site=None)  # nobody said: no references
    mahti = SiteFacts(site="mahti", network=Network(transport="ib"))
    assert config.site(None, {"HPCML_SITE_FACTS": json.dumps(facts)}) == mahti
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(dict(facts, site="puhti")))
    assert config.site(path, {"HPCML_SITE_FACTS": json.dumps(facts)}).site == "puhti"  # file first
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
    facts = config.site(None, {"HPCML_SITE_FACTS": shown})
    assert facts.site == "lumi" and facts == lumi.smoke_facts
    assert facts.allreduce[0].busbw_gbs == 125 and facts.network.provider == "cxi"


def test_outside_an_image_nothing_is_promised():
    facts = config.image()
    assert facts.target is None and facts.deepspeed.promised_ops == ()


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"site": "lumi", "allreduce": [{"nodes": "two"}]}', r"allreduce\[0\]: nodes: expected int, not 'two'"),
        ('{"site": "lumi", "network": []}', "network: expected dict"),
        ('{"site": "lumi", "slurm_mpi": 3}', "slurm_mpi: expected str, not 3"),
    ],
)
def test_site_facts_of_the_wrong_shape_are_one_line_naming_the_key(text, said):
    with pytest.raises(config.ConfigError, match=rf"^\$HPCML_SITE_FACTS: .*{said}"):
        config.site(None, {"HPCML_SITE_FACTS": text})


def test_an_image_json_of_the_wrong_shape_is_one_line_naming_the_key(tmp_path):
    path = tmp_path / "image.json"
    path.write_text('{"target": "cpu", "gpu": {"archs": "sm_80"}, "deepspeed": {}}')
    with pytest.raises(config.ConfigError, match=r"image\.json: gpu: archs: expected list, not 'sm_80'"):
        config.image(path)
