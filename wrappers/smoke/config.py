"""What the image promises, written into it at build time (config.json beside this file):
the target, the DeepSpeed ops, and per site the network and all-reduce references."""

import json
import os
from pathlib import Path

BAKED = Path(__file__).with_name("config.json")


class ConfigError(ValueError):
    pass


def load(path=None):
    path = Path(path) if path else BAKED
    if not path.is_file():
        if path == BAKED:   # run outside an image: nothing promised, no references
            return {"target": None, "sites": {}, "deepspeed": {"promised_ops": []}}
        raise ConfigError(f"{path}: no such file (expected a smoke config.json)")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path}:{error.lineno}: not valid JSON: {error.msg}") from None


def site(config, name=None):
    """(name, facts) of the site this run is on: --site, else $HPCML_SITE, else the image's
    only site; (None, {}) when unknown. A --site the image does not know is an error; an
    $HPCML_SITE it does not know (another image's site) just means no references."""
    sites = config.get("sites", {})
    if name is None:
        name = os.environ.get("HPCML_SITE") or (next(iter(sites)) if len(sites) == 1 else None)
        if name not in sites:
            return name, {}
    if sites and name not in sites:
        raise ConfigError(f"site {name!r} is not one this image was built for "
                          f"(expected one of: {', '.join(sorted(sites))})")
    return name, sites.get(name, {})
