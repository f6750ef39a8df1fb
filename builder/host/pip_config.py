"""The host pip's configuration, read from its files as pip reads them, without starting pip
(`python3 -m pip config list` took 0.3 s of every build, a no-op one too).

pip's order, lowest first, a later file winning: the global files (each of XDG_CONFIG_DIRS,
default /etc/xdg, then /etc: `<dir>/pip/pip.conf`, `/etc/pip.conf`), the user's
(`~/.pip/pip.conf`, then `$XDG_CONFIG_HOME/pip/pip.conf`; skipped when PIP_CONFIG_FILE names a
file that exists), the site's (`pip.conf` under the host python3's sys.prefix), and
PIP_CONFIG_FILE; PIP_CONFIG_FILE=/dev/null reads none. PIP_<KEY> variables win over all.

Example: values(("cert", "index-url")) -> {"cert": "/etc/ssl/certs/ca-certificates.crt"}
"""

import configparser
import os
from pathlib import Path

from .. import runner
from ..errors import ToolError


def host_prefix() -> str:
    """sys.prefix of the python3 on PATH, whose pip the build host's settings are (-S: no
    site import, so it costs milliseconds; a venv's prefix comes from pyvenv.cfg anyway)."""
    try:
        result = runner.run(["python3", "-S", "-c", "import sys; print(sys.prefix)"], check=False, timeout=30)
    except ToolError:
        return ""
    return result.stdout.strip() if result.returncode == 0 else ""


def files(env=os.environ, prefix=None) -> list:
    """pip's configuration files, lowest priority first."""
    named = env.get("PIP_CONFIG_FILE")
    if named == os.devnull:
        return []
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    config_dirs = [d for d in env.get("XDG_CONFIG_DIRS", "/etc/xdg").split(":") if d] or ["/etc/xdg"]
    found = [Path(d, "pip", "pip.conf") for d in config_dirs] + [Path("/etc/pip.conf")]
    if not (named and Path(named).exists()):
        user_dir = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
        found += [home / ".pip" / "pip.conf", user_dir / "pip" / "pip.conf"]
    prefix = host_prefix() if prefix is None else prefix
    if prefix:
        found.append(Path(prefix, "pip.conf"))
    if named:
        found.append(Path(named))
    return found


def values(keys, env=os.environ, prefix=None) -> dict:
    """{key: value} for the ``keys`` set anywhere: a PIP_<KEY> variable, else the files'
    [global] section, else the first other section that sets it (as `pip config list` sorts
    them)."""
    merged = {}  # (section, key) -> value, a later file winning
    for path in files(env, prefix):
        parser = configparser.RawConfigParser()
        try:
            parser.read(path, encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError):
            continue  # pip stops on a broken file; the build then finds out from pip itself
        for section in parser.sections():
            for key, value in parser.items(section):
                merged[(section, key.lower().replace("_", "-"))] = value
    found = {}
    for key in keys:
        variable = env.get("PIP_" + key.upper().replace("-", "_"))
        if variable:
            found[key] = variable
            continue
        sections = sorted(s for s, k in merged if k == key)
        if sections:
            found[key] = merged[("global" if "global" in sections else sections[0], key)]
    return found
