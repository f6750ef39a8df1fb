"""The two things a smoke run judges against.

- What the image promises, written into it at build time: `image.json` under the venv's
  share/hpc-ml-runtime/ (the target, its DeepSpeed ops, its communication library).
- What the site expects (all-reduce references, the network between nodes, Slurm's MPI
  plugin): read at run time, from --site-facts FILE or from $HPCML_SITE_FACTS, which
  singularity_wrapper sets from the site's settings. Correcting a reference therefore
  rebuilds no image.

Both are records of hpcml_facts (ImageFacts, SiteFacts), read by attribute.
"""

import json
import os
import sys
from pathlib import Path

import hpcml_contract as contract
from hpcml_facts import FactsError, ImageFacts, SiteFacts

IMAGE = Path(sys.prefix) / contract.IMAGE_FACTS


class ConfigError(ValueError):
    pass


def image(path=None) -> ImageFacts:
    """The image's promises; outside an image (no image.json) nothing is promised."""
    path = Path(path) if path else IMAGE
    if not path.is_file():
        if path == IMAGE:
            return ImageFacts(target=None)
        raise ConfigError(f"{path}: no such file (expected the image's image.json)")
    return _read(ImageFacts, path.read_text(), str(path))


def site(path=None, environ=os.environ) -> SiteFacts:
    """The facts of the site this run is on; SiteFacts(site=None) when nobody said."""
    if path:
        try:
            text, where = Path(path).read_text(), str(path)
        except OSError as error:
            raise ConfigError(f"--site-facts {path}: {error.strerror} (expected a site facts JSON file)") from None
    elif environ.get(contract.SITE_FACTS):
        text, where = environ[contract.SITE_FACTS], f"${contract.SITE_FACTS}"
    else:
        return SiteFacts(site=None)
    return _read(SiteFacts, text, where)


def _read(record, text, where):
    try:
        return record.from_json(json.loads(text), where)
    except json.JSONDecodeError as error:
        raise ConfigError(f"{where}:{error.lineno}: not valid JSON: {error.msg}") from None
    except FactsError as error:
        raise ConfigError(str(error)) from None
