"""A stand-in for builder.runner, the builder's one door to external commands: it records
every command and answers as the real tool would for what the unit tests need, so building,
publishing and doctor logic is tested without Apptainer or an image.

    fake = FakeRunner(monkeypatch)
    layers.build(tree, "cpu", images=tmp_path, progress=Progress(), space_check=False)
    assert [c.layer for c in fake.builds] == ["devel", "base", "image"]
"""

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from builder import runner
from builder.layerbuild import packing

# What a built image answers when asked about itself: its labels (`inspect`) and what the SBOM's
# probe (`exec ... python -I -m smoke.contents`) prints, as a minimal image would
# (the cpu target's: the labels that say which target it was built as, and its torch)
CPU_LABELS = {
    "org.hpc-ml-containers.target": "cpu",
    "org.hpc-ml-containers.arch": "x86_64",
    "org.hpc-ml-containers.gpu.arch": "none",
    "org.hpc-ml-containers.recipe": json.dumps({"torch": {"flavour": "cpu"}}),
    "org.hpc-ml-containers.version.torch": "2.13.0",
}
IMAGE_ANSWERS = {
    ("inspect",): json.dumps({"data": {"attributes": {"labels": CPU_LABELS}}}),
    ("sif",): "3    |1       |NONE    |86016-90112               |FS (Squashfs/*System/amd64)\n",  # `sif list`
    ("exec",): '{"os": {"ID": "debian", "VERSION_ID": "12"}, "debs": [["bash", "5.2.15-2+b7", "amd64"]], '
    '"dists": [["torch", "2.13.0+cpu"]], "ops": []}',
}


@dataclass
class Build:
    """One `apptainer build` as the builder asked for it."""

    argv: list
    definition: str  # the text of the .def it was given
    output: Path  # where Apptainer was to write it (in the build's work folder)
    build_args: dict
    uncompressed: bool
    env: dict = None  # the environment it ran in

    @property
    def layer(self) -> str:
        """devel, base or image, from the definition's file name."""
        name = Path(self.argv[-1]).name
        return name.split(".")[-2] if name.count(".") == 2 else "image"


class FakeRunner:
    """Records commands; `apptainer build` writes a small image file, which packing.repack
    moves where the image goes (``packings``: how each was to be packed), `build --help`
    names --mksquashfs-args, anything else succeeds with no output (or what ``answers`` says:
    {program name: stdout})."""

    def __init__(self, monkeypatch, answers=None):
        self.commands, self.builds, self.packings = [], [], []
        self.answers = answers or {}
        monkeypatch.setattr(runner, "run", self.run)
        monkeypatch.setattr(runner, "run_logged", self.run_logged)
        monkeypatch.setattr(packing, "repack", self.repack)

    def repack(self, packed_as, built, out, work):
        self.packings.append(packed_as)
        out.write_bytes(built.read_bytes())
        built.unlink()

    def run(self, argv, *, input=None, cwd=None, env=None, check=True, timeout=None):
        argv = [str(a) for a in argv]
        self.commands.append(argv)
        stdout = "  --mksquashfs-args string\n" if argv[1:] == ["build", "--help"] else ""
        stdout = IMAGE_ANSWERS.get(tuple(argv[1:2]), stdout) if len(argv) > 2 else stdout
        stdout = self.answers.get(Path(argv[0]).name, stdout)
        return subprocess.CompletedProcess(argv, 0, stdout, "")

    def run_logged(
        self, argv, log_path, *, cwd=None, env=None, what=None, note="", cleanup=(), on_line=None, timeout=None
    ):
        argv = [str(a) for a in argv]
        self.commands.append(argv)
        if argv[1] == "build":
            args = dict(value.split("=", 1) for flag, value in zip(argv, argv[1:]) if flag == "--build-arg")
            output = Path(argv[-2])
            definition = Path(argv[-1]).read_text()
            self.builds.append(Build(argv, definition, output, args, "--mksquashfs-args" in argv, env or {}))
            output.write_bytes(f"fake image of {Path(argv[-1]).name}\n".encode())
        Path(log_path).write_text("")
