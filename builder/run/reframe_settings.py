"""ReFrame's configuration of one site, as a Python file: `reframe -C settings.py`.

One system named as the site, one partition, `jobs`, whose checks each ask Slurm for what
their job script names (partition, account, GPUs, memory) and launch themselves: the script
holds the site's srun, torchrun or mpirun line, so ReFrame's own launcher is `local`.
Every value is written by `repr` (pprint), so whatever a site file holds is a Python literal
of the same value, never code; the one comment line holds no value.

Example: `hpcml reframe cpu --site local --scheduler squeue --out rfm` writes rfm/settings.py:

    # ReFrame configuration written by hpcml reframe: reframe -C settings.py -c hpcml_checks.py -r
    site_configuration = {'systems': [{'name': 'local',
                                       'descr': 'This kind of Linux box - no GPU; ...',
                                       'hostnames': ['.*'],
                                       ...
"""

import pprint

from ..recipes.site_model import Site

# sacct where the site keeps Slurm's accounting; squeue (no exit codes) where it does not
SCHEDULERS = ("slurm", "squeue")
HEADER = "# ReFrame configuration written by hpcml reframe: reframe -C settings.py -c hpcml_checks.py -r\n"


def configuration(site: Site, scheduler: str) -> dict:
    partition = {
        "name": "jobs",
        "descr": "the image's checks, each placed by its job script",
        "scheduler": scheduler,
        "launcher": "local",
        "environs": ["builtin"],
        "max_jobs": 4,
    }
    system = {
        "name": site.name,
        "descr": site.description,
        "hostnames": [".*"],
        "modules_system": "nomod",
        "partitions": [partition],
    }
    return {"systems": [system]}


def settings(site: Site, scheduler: str) -> str:
    text = pprint.pformat(configuration(site, scheduler), width=100, sort_dicts=False)
    return f"{HEADER}site_configuration = {text}\n"
