"""docs/running.md's sample job script is the one `jobscript` writes today (issue 47): its
first command under "Their job scripts" is run again, as shown, in a project folder outside
the checkout, and the script it writes must be the page's, the two folders aside."""

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

PAGE = ROOT / "docs" / "running.md"
# what the page writes for the folder the script is written in, and for the builder's checkout
PROJECT, CHECKOUT = "/home/me/project", "/home/me/hpc-ml-containers"


def shown_command_and_script():
    text = PAGE.read_text()
    section = text[text.index("### Their job scripts") :]
    command = re.search(r"^```sh\n(hpcml jobscript [^\n]*)\n", section, re.M).group(1)
    script = re.search(r"^The first writes this.*?^```text\n(.*?)^```$", section, re.M | re.S).group(1)
    return command, script


def test_the_sample_script_is_what_jobscript_writes_today(tmp_path):
    command, shown = shown_command_and_script()
    words = shlex.split(command)
    assert words[:2] == ["hpcml", "jobscript"] and "--out" in words, command
    project = tmp_path / "project"
    shutil.copytree(ROOT / "examples", project / "examples")
    # the installed command, as the page runs it: its hints name `hpcml`
    hpcml = Path(sys.executable).with_name("hpcml")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HPCML_", "SING_", "PYTHONPATH"))}
    result = subprocess.run([str(hpcml), *words[1:]], cwd=project, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    written = (project / words[words.index("--out") + 1]).read_text()
    assert written.replace(str(project), PROJECT).replace(str(ROOT), CHECKOUT) == shown
