"""The builder's wheel carries the records it shares with the images at its top level.

builder/contract.py and the builder's users of the image records import `hpcml_contract` and
`hpcml_facts` by those names, as the smoke suite does inside an image. An editable install finds them in runtime/
(dev-mode-dirs in pyproject.toml); a wheel copies them here. Not in force-include: hatchling
copies those into editable installs too, where they would hide the checkout's own.
"""

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

# hpcml_facts imports the other two: the builder imports them with it
SHARED_RECORDS = ("hpcml_contract.py", "hpcml_facts.py", "hpcml_json.py", "hpcml_report.py")


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version, build_data):
        if version == "standard":
            build_data["force_include"].update({f"runtime/{name}": name for name in SHARED_RECORDS})
