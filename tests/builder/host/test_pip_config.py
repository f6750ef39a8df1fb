"""host/pip_config reads pip's configuration files as pip does, without starting pip: the
same values as `python3 -m pip config list` (the real pip, as the oracle) in environments a
test makes: user files old and new, PIP_CONFIG_FILE, /dev/null, sections, variables. A test of
the real pip (marker `tools`): `make test` runs it, `make unit` leaves it out."""

import os
import re
import subprocess

import pytest

from builder.host import pip_config

pytestmark = pytest.mark.tools

KEYS = ("cert", "index-url", "extra-index-url", "find-links")


def pips_own(env):
    """What the builder read from `pip config list` before: the first of each key in its sorted
    listing, then the PIP_<KEY> variables."""
    listing = subprocess.run(
        ["python3", "-m", "pip", "config", "list"], env=env, capture_output=True, text=True, timeout=120, check=True
    ).stdout
    found = {}
    for key, value in re.findall(r"^[^.]+\.([a-z-]+)='(.*)'$", listing, re.M):
        found.setdefault(key, value)
    for key in KEYS:
        if env.get("PIP_" + key.upper().replace("-", "_")):
            found[key] = env["PIP_" + key.upper().replace("-", "_")]
    return {key: found[key] for key in KEYS if key in found}


@pytest.fixture
def home(tmp_path):
    home = tmp_path / "home"
    (home / ".pip").mkdir(parents=True)
    (home / ".config" / "pip").mkdir(parents=True)
    return home


def environment(home, **more):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "XDG_"))}
    return {**env, "HOME": str(home), "XDG_CONFIG_DIRS": str(home / "etc-xdg"), **more}


CASES = {
    "the new user file wins over the old": {
        ".pip/pip.conf": "[global]\nindex-url = https://old.example/simple\ncert = /old.pem\n",
        ".config/pip/pip.conf": "[global]\nindex-url = https://new.example/simple\n",
    },
    "a global file under XDG_CONFIG_DIRS, a user file over it": {
        "etc-xdg/pip/pip.conf": "[global]\nfind-links = /wheels-global\nindex-url = https://global.example/simple\n",
        ".config/pip/pip.conf": "[global]\nfind-links = /wheels-user\n",
    },
    "another section than global": {
        ".config/pip/pip.conf": "[install]\nfind-links = /wheels-install\nextra-index-url = https://x.example/s\n",
    },
}


@pytest.mark.parametrize("files", CASES.values(), ids=CASES)
def test_the_files_give_what_pip_config_list_gives(home, files):
    for name, text in files.items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(text)
    env = environment(home)
    assert pip_config.values(KEYS, env) == pips_own(env)


def test_pip_config_file_wins_and_hides_the_users_files(home):
    (home / ".config" / "pip" / "pip.conf").write_text("[global]\nindex-url = https://user.example/simple\n")
    named = home / "named.conf"
    named.write_text("[global]\nindex-url = https://named.example/simple\n")
    env = environment(home, PIP_CONFIG_FILE=str(named))
    assert pip_config.values(KEYS, env)["index-url"] == "https://named.example/simple"
    assert pip_config.values(KEYS, env) == pips_own(env)


def test_pip_config_file_dev_null_reads_no_file_and_a_variable_wins_over_files(home):
    (home / ".config" / "pip" / "pip.conf").write_text("[global]\nindex-url = https://user.example/simple\n")
    quiet = environment(home, PIP_CONFIG_FILE=os.devnull)
    assert "index-url" not in pip_config.values(KEYS, quiet)
    assert pip_config.values(KEYS, quiet) == pips_own(quiet)
    variable = environment(home, PIP_INDEX_URL="https://variable.example/simple")
    assert pip_config.values(KEYS, variable)["index-url"] == "https://variable.example/simple"
    assert pip_config.values(KEYS, variable) == pips_own(variable)
