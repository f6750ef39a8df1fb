"""Python runs this at start-up when its folder is on PYTHONPATH: the tests put it there to hold
every process of an example run to NCCL's device rule (device_rule.py). A process that never
imports torch pays nothing: the rule is installed once torch has been imported."""

import importlib.abc
import importlib.util
import sys


class _AfterTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            import device_rule

            device_rule.install()

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _AfterTorch())
