"""The image's checks for a site's ReFrame run, written beside their hpcml_checks.json by
`hpcml reframe TARGET --site SITE --out DIR` (docs/reframe.md).

    reframe -C DIR/settings.py -c DIR/hpcml_checks.py -t production -r

Each check runs one job script of DIR/jobs/ in an allocation of the nodes, tasks and Slurm
options that script names: the smoke suite's check through the site's wrapper and launcher,
as users run it. It passes when the script exits 0 and the suite printed each verdict the
check needs as PASS; the all-reduce check also reports busbw at the site's reference size
to ReFrame's perflog, judged against the site's figure less its tolerance.
"""

import json
import os
import re

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.backends import getlauncher
from reframe.core.builtins import performance_function, run_after, run_before, sanity_function, variable

HERE = os.path.dirname(os.path.abspath(__file__))
EXIT_LINE = "hpcml check exit status: "


def _params():
    with open(os.path.join(HERE, "hpcml_checks.json"), encoding="utf-8") as file:
        return json.load(file)


class HpcmlSmokeCheck(rfm.RunOnlyRegressionTest):
    smoke_check = variable(str)
    valid_systems = ["*"]
    valid_prog_environs = ["*"]
    sourcesdir = None
    executable = "bash"
    tags = {"production", "ml", "hpcml"}
    maintainers = ["hpc-ml-containers"]

    @run_after("init")
    def take_the_params(self):
        params = _params()
        self.spec = params["checks"].get(self.smoke_check)
        self.skip_if(self.spec is None, f"hpcml_checks.json holds no {self.smoke_check} check")
        self.descr = f"{params['target']} on {params['site']}: {self.spec['descr']}"
        self.tags = self.tags | {self.smoke_check}
        self.executable_opts = [os.path.join(HERE, self.spec["script"])]
        self.num_tasks_per_node = self.spec["tasks_per_node"]
        self.num_tasks = self.spec["nodes"] * self.spec["tasks_per_node"]
        self.num_cpus_per_task = self.spec["cpus_per_task"]
        self.time_limit = self.spec["time_s"]
        # the script's own status: the first line after it sees $?
        self.postrun_cmds = [f'echo "{EXIT_LINE}$?"']

    @run_before("run")
    def the_script_launches_its_ranks(self):
        # its srun, torchrun or mpirun line is the site's; ReFrame only allocates
        self.job.launcher = getlauncher("local")()
        self.job.options += self.spec["options"]

    @sanity_function
    def passed(self):
        verdicts = [sn.assert_found(rf"^{re.escape(name)}\s+PASS\b", self.stdout) for name in self.spec["must_pass"]]
        return sn.all([sn.assert_found(rf"^{EXIT_LINE}0$", self.stdout), *verdicts])


@rfm.simple_test
class HpcmlPreflight(HpcmlSmokeCheck):
    smoke_check = "preflight"


@rfm.simple_test
class HpcmlAllreduce(HpcmlSmokeCheck):
    smoke_check = "allreduce"

    @run_after("init")
    def take_the_reference(self):
        ref = self.spec and self.spec.get("reference")
        if ref:
            self.reference = {"*": {"busbw": (ref["busbw_gbs"], -ref["tolerance"], None, "GB/s")}}

    @performance_function("GB/s")
    def busbw(self):
        ref = self.spec.get("reference") or {"bytes": 8, "dtype": "float32"}
        # the suite's table: size, count, type, time, algbw, busbw, #wrong
        row = rf"^\s*{ref['bytes']}\s+\d+\s+{re.escape(ref['dtype'])}\s+\S+\s+\S+\s+(\S+)\s+\d+\s*$"
        return sn.extractsingle(row, self.stdout, 1, float)


@rfm.simple_test
class HpcmlDdp(HpcmlSmokeCheck):
    smoke_check = "ddp"


@rfm.simple_test
class HpcmlDeepspeed(HpcmlSmokeCheck):
    smoke_check = "deepspeed"
