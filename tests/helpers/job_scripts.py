"""Job scripts planned and written in the test's interpreter, and read back: what the tests of
`builder jobscript` (tests/builder/run/test_jobscript*.py) share."""

import itertools
import re

from conftest import ROOT

from builder.errors import RecipeError
from builder.run import jobscript
from builder.run.jobscript import LAUNCHES, Request

WRAPPER = str(ROOT / "wrappers" / "singularity_wrapper")


def make(tree, target, **asked):
    """Plan and script; a site that requires an account gets its example one."""
    asked.setdefault("program", ("train.py", "--epochs", "10"))
    asked.setdefault("wrapper", "singularity_wrapper")
    site = tree.sites[asked.get("site") or tree.target(target).sites[0].name]
    if site.slurm.account and site.slurm.account.required:
        asked.setdefault("account", site.slurm.account.example)
    plan = jobscript.plan(tree, target, Request(**asked))
    return plan, jobscript.script(plan)


def sbatch_lines(text):
    return dict(re.findall(r"^#SBATCH --([a-z-]+)(?:=(.*))?$", text, re.M))


def launch_line(text):
    return text.rstrip("\n").splitlines()[-1]


def every_script(tree):
    """Every target on every site it may run on, every launch mode, one and two nodes."""
    for target_name in sorted(tree.targets):
        for site_name, launch, nodes in itertools.product(sorted(tree.sites), LAUNCHES, (1, 2)):
            try:
                yield (
                    f"{target_name}.{site_name}.{launch}.{nodes}",
                    make(tree, target_name, site=site_name, launch=launch, nodes=nodes, program=("-m", "smoke", "all"))[
                        1
                    ],
                )
            except RecipeError:
                continue  # an arch the image lacks, a size the site refuses
