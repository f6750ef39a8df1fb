"""The two things a smoke run judges against.

- What the image promises, written into it at build time: `image.json` under the venv's
  share/hpc-ml-runtime/ (the target, its DeepSpeed ops, its communication library).
- What the site expects (all-reduce references, the network between nodes, Slurm's MPI
  plugin, GPUs per node, notes): read at run time, from --site-facts FILE or from
  $HPCML_SITE_FACTS, which singularity_wrapper sets from the site's settings. Correcting a
  reference therefore rebuilds no image.
"""

import json
import os
import sys
from pathlib import Path

import hpcml_contract as contract

IMAGE = Path(sys.prefix) / contract.IMAGE_FACTS


class ConfigError(ValueError):
    pass


def image(path=None) -> dict:
    """The image's promises; outside an image (no image.json) nothing is promised."""
    path = Path(path) if path else IMAGE
    if not path.is_file():
        if path == IMAGE:
            return {"target": None, "deepspeed": {"promised_ops": []}}
        raise ConfigError(f"{path}: no such file (expected the image's image.json)")
    return _parse(path.read_text(), str(path))


def site(path=None, environ=os.environ):
    """(name, facts) of the site this run is on; (None, {}) when nobody said."""
    if path:
        try:
            text, where = Path(path).read_text(), str(path)
        except OSError as error:
            raise ConfigError(f"--site-facts {path}: {error.strerror} (expected a site facts JSON file)") from None
    elif environ.get(contract.SITE_FACTS):
        text, where = environ[contract.SITE_FACTS], f"${contract.SITE_FACTS}"
    else:
        return None, {}
    facts = _parse(text, where)
    if not isinstance(facts, dict) or not isinstance(facts.get("site"), str):
        raise ConfigError(f'{where}: expected a JSON object with the site\'s name under "site"')
    return facts["site"], facts


def _parse(text, where):
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(f"{where}:{error.lineno}: not valid JSON: {error.msg}") from None
