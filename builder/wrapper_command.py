"""`singularity_wrapper` and `apptainer_wrapper` on PATH after `pip install`: each replaces
itself with the bash wrapper shipped with the builder (in an editable install, the checkout's
own, so it never goes stale), which finds its site settings beside it. A module of its own:
pip's entry point for the wrapper, which starts without the CLI's imports."""

import os
import sys

from .resources import wrapper


def main():
    script = str(wrapper())
    os.execv("/bin/bash", ["bash", script, *sys.argv[1:]])
