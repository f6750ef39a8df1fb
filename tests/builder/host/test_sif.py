"""host.sif without an image: the root partition found in `apptainer sif list`, and each
path's mode and owner read from `unsquashfs -lln`, the special bits included (an ordinary user's
unsquashfs drops them; `unpack` puts them back)."""

import subprocess
from pathlib import Path

import pytest

from builder import runner
from builder.host import sif

LISTING = """drwxr-xr-x 0/0                      3 2026-01-01 00:00 squashfs-root
lrwxrwxrwx 0/0                      7 2026-01-01 00:00 squashfs-root/bin -> usr/bin
lrwxrwxrwx 0/7                     20 2026-01-01 00:00 squashfs-root/usr/bin/vi -> /etc/alternatives/vi
-rwsr-xr-x 0/0                  68248 2025-12-14 14:00 squashfs-root/usr/bin/passwd
drwxrwsr-x 0/50                     3 2026-01-01 00:00 squashfs-root/var/local
-rw-rw---- 0/43                     0 2026-01-01 00:00 squashfs-root/var/log/btmp
drwxrwxrwt 0/0                      3 2026-01-01 00:00 squashfs-root/tmp
-rw-r--r-- 0/0                      9 2026-01-01 00:00 squashfs-root/opt/a name with spaces
"""


@pytest.mark.parametrize(
    "symbolic, mode",
    [("-rwsr-xr-x", 0o4755), ("drwxrwsr-x", 0o2775), ("drwxrwxrwt", 0o1777), ("-rwSr--r--", 0o4644),
     ("drwxr-xr-T", 0o1754), ("-rw-rw----", 0o660), ("----------", 0)],
)  # fmt: skip
def test_a_symbolic_mode_reads_as_its_bits(symbolic, mode):
    assert sif._mode_bits(symbolic) == mode


def test_the_modes_of_an_image_are_read_from_its_listing(monkeypatch):
    def run(argv, **kwargs):
        assert argv[:3] == ["unsquashfs", "-offset", "4096"] and "-lln" in argv
        return subprocess.CompletedProcess(argv, 0, LISTING, "")

    monkeypatch.setattr(runner, "run", run)
    found = sif.listing(sif.Partition(Path("x.sif"), 4096, 100))
    assert found == {
        "/": (0o755, 0, 0),
        "/bin": (0o777, 0, 0),
        "/usr/bin/passwd": (0o4755, 0, 0),
        "/var/local": (0o2775, 0, 50),
        "/var/log/btmp": (0o660, 0, 43),
        "/tmp": (0o1777, 0, 0),
        "/opt/a name with spaces": (0o644, 0, 0),
        "/usr/bin/vi": (0o777, 0, 7),  # a link: its owner, for packing.py; unpack's chmod skips it
    }
