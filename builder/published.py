"""The files of a published version (PREFIX/NAME/VERSION/) that more than one stage names:
publish writes them, job scripts (`--published`) and verify read them. Below every stage, so
that run/ reads a publish record without importing publish/.
"""

MANIFEST = "publish.json"  # name, version, target, site, the module files, ...
IMAGE = "image.sif"  # the image, as the module and the job scripts run it
