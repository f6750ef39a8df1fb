"""The records that pass between the builder and the runtime, as the runtime defines them
(runtime/hpcml_facts.py, loaded from its source as builder/contract.py loads the variables):
what an image promises (ImageFacts, written as image.json by the runtime block), what a site
expects of a run (SiteFacts, written into each site file as $HPCML_SITE_FACTS), and the smoke
suite's report (SmokeReport, smoke.json, which smoke, publish and verify read).

Example: SiteFacts(site="lumi", network=Network(transport="AWS Libfabric")).to_json()
"""

from . import resources

_FACTS = resources.runtime_module("hpcml_facts")

ImageFacts = _FACTS.ImageFacts
GpuPromise = _FACTS.GpuPromise
DeepSpeedPromise = _FACTS.DeepSpeedPromise
CommStack = _FACTS.CommStack
SiteFacts = _FACTS.SiteFacts
Network = _FACTS.Network
Reference = _FACTS.Reference
SmokeReport = _FACTS.SmokeReport
Verdict = _FACTS.Verdict
FactsError = _FACTS.FactsError
NOT_MEASURED, PASS, FAIL = _FACTS.NOT_MEASURED, _FACTS.PASS, _FACTS.FAIL
