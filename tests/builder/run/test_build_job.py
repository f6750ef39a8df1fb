"""run/build_job.py: the Slurm job a login node with no privilege sends a site-image target's
build to, from the site's file (site_image.build_job), and the memory from the site's image;
doctor's rows of it. The runner is a fake: the image's listing is what unsquashfs would print."""

import dataclasses
import shlex

import pytest
from conftest import RECIPES
from helpers.fake_runner import FakeRunner

from builder.host import build_route, route_facts
from builder.recipes.tree import RecipeTree
from builder.run import build_job, doctor

TREE = RecipeTree(RECIPES)
ROUTES = {
    "unpacked": build_route.Unpacked,
    "proot": build_route.Proot,
    "root": build_route.Root,
    "fakeroot": build_route.Fakeroot,
}
# 20 GB and 10.6 GB of files, a link and a device (whose "size" is its numbers)
LISTING = """drwxr-xr-x 0/0                      3 2026-01-01 00:00 squashfs-root
-rw-r--r-- 0/0            20000000000 2026-01-01 00:00 squashfs-root/opt/big
-rwxr-xr-x 0/0            10600000000 2026-01-01 00:00 squashfs-root/opt/venv/lib/torch.so
lrwxrwxrwx 0/0                      7 2026-01-01 00:00 squashfs-root/bin -> usr/bin
crw-rw-rw- 0/0                    1,3 2026-01-01 00:00 squashfs-root/dev/null
"""


def _laif(tmp_path, **job):
    """lumi-laif with its site's image at a file here, its build job changed by ``job``."""
    target = TREE.target("lumi-laif")
    image = tmp_path / "laif.sif"
    image.write_text("a site image")
    built = dataclasses.replace(target.site_image.build_job, **job)
    return dataclasses.replace(
        target, site_image=dataclasses.replace(target.site_image, path=str(image), build_job=built)
    )


def test_lumis_job_asks_twice_the_images_uncompressed_size_on_a_cpu_partition(tmp_path, monkeypatch):
    FakeRunner(monkeypatch, answers={"unsquashfs": LISTING})
    found = build_job.advice(_laif(tmp_path), "apptainer")
    assert found.sbatch == (
        "sbatch -p small -c 16 --mem=62G -t 04:00:00 "
        "--wrap 'module load LUMI systools && APPTAINER_TMPDIR=/tmp python -m builder build lumi-laif'"
    )
    assert found.memory.startswith("62 GB, the build's temporary folders in /tmp (node memory): twice the ")
    assert "uncompressed 30.6 GB of " in found.memory and "CSCfi/csc-user-guide" in found.memory


def test_a_folder_with_a_space_stays_one_word_in_the_job(tmp_path, monkeypatch):
    FakeRunner(monkeypatch, answers={"unsquashfs": LISTING})
    found = build_job.advice(_laif(tmp_path, tmpdir="/local scratch/$USER", modules=()), "apptainer")
    wrapped = shlex.split(found.sbatch)[-1]
    assert shlex.split(wrapped)[0] == "APPTAINER_TMPDIR=/local scratch/$USER"


def test_a_site_image_that_is_not_here_gives_no_figure(monkeypatch):
    FakeRunner(monkeypatch, answers={"unsquashfs": LISTING})
    found = build_job.advice(TREE.target("lumi-laif"), "apptainer")
    assert found.sbatch == "" and found.memory.startswith("unknown: the site's image /appl/local/laifs/")
    assert build_job.advice(TREE.target("cpu"), "apptainer") is None  # no site image: built anywhere


@pytest.mark.parametrize(
    ("route", "shown"), [("unpacked", True), ("proot", True), ("root", False), ("fakeroot", False)]
)
def test_doctor_names_the_job_only_where_a_login_node_has_no_privilege(route, shown, monkeypatch, tmp_path, capsys):
    FakeRunner(monkeypatch, answers={"apptainer": "apptainer version 1.4.5\n", "unsquashfs": LISTING})
    facts = route_facts.Facts(root=False, apptainer="/usr/bin/apptainer", userns=False, subids=False, setuid=False,
                              fakeroot_command=False)  # fmt: skip
    monkeypatch.setattr(route_facts, "facts", lambda site=None: facts)
    monkeypatch.setattr(build_route, "decide", lambda found: ROUTES[route](f"the {route} route"))
    doctor.report(TREE, tmp_path)
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("build ")]
    jobs = [row for row in rows if row.startswith(("build job", "build memory"))]
    if not shown:
        assert jobs == []
        return
    targets = sorted(name for name, target in TREE.targets.items() if target.site_image)
    assert [row.split()[2] for row in jobs] == [f"{name}:" for name in targets for _ in (1, 2)]
    assert all("unknown" in row for row in jobs)  # no LUMI image on this machine
