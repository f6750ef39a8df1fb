"""bundle.toolbox_part: the Apptainer toolbox's Debian root and pinned Apptainer in a bundle,
resolved when it is made and checked before a build provisions from it. The network and apt
are faked here; a real toolbox made from a bundle with no network:
tests/images/test_bundle_rebuild.py."""

import hashlib
import io
import subprocess
import tarfile

import pytest
from conftest import run_builder

from builder.bundle import debian_part, fetched, manifest, toolbox_part
from builder.errors import ToolError
from builder.host import debian_resolve, toolbox
from builder.host.progress import Progress
from builder.lockfile import DebPackage, read_debian

CONTROL = (
    "Package: apptainer\nVersion: 1.4.5-2\nArchitecture: amd64\n"
    "Pre-Depends: init-system-helpers (>= 1.54~)\n"
    "Depends: ca-certificates, squashfs-tools | squashfs-tools-ng, libc6 (>= 2.38),\n"
    " libseccomp2:any (>= 2.5.0)\nRecommends: e2fsprogs\nDescription: t\n"
)


def deb_with_control(text: str) -> bytes:
    """A .deb in Debian's layout (ar: debian-binary, control.tar.xz, data.tar.xz)."""

    def tar(files: dict) -> bytes:
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w:xz") as archive:
            for name, data in files.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
        return out.getvalue()

    members = [(b"debian-binary", b"2.0\n"), (b"control.tar.xz", tar({"./control": text.encode()}))]
    members.append((b"data.tar.xz", tar({})))
    out = b"!<arch>\n"
    for name, body in members:
        header = name.ljust(16) + b"0".ljust(12) + b"0".ljust(6) + b"0".ljust(6) + b"100644".ljust(8)
        out += header + str(len(body)).encode().ljust(10) + b"`\n" + body + (b"\n" if len(body) % 2 else b"")
    return out


def test_the_depends_are_each_entrys_first_choice_without_qualifiers():
    names = toolbox_part.depends(deb_with_control(CONTROL))
    assert names == ("init-system-helpers", "ca-certificates", "squashfs-tools", "libc6", "libseccomp2")


def test_dpkg_reads_the_test_package_as_debian_makes_them(tmp_path):
    (tmp_path / "t.deb").write_bytes(deb_with_control(CONTROL))
    shown = subprocess.run(["dpkg-deb", "-f", str(tmp_path / "t.deb"), "Depends"], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("ca-certificates, squashfs-tools | squashfs-tools-ng")


def _fake_sources(monkeypatch, deb: bytes):
    asked = []
    monkeypatch.setitem(toolbox.APPTAINER_SHA256, "x86_64", hashlib.sha256(deb).hexdigest())

    def fetch(url, dest, sha256):
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(deb)
        asked.append(url)
        return "fetched"

    def resolve(suite, arch, mirror, names, **options):
        asked.append((suite, arch, mirror, tuple(names)))
        return (DebPackage("apt", "3.0.4", "amd64", "a" * 64), DebPackage("libc6", "2.41-12", "amd64", "b" * 64))

    monkeypatch.setattr(fetched, "fetch", fetch)
    monkeypatch.setattr(debian_resolve, "resolve", resolve)
    monkeypatch.setattr(debian_part, "fetch_indexes", lambda locks, mirror, out: {"debian/dists/trixie/Release": "c"})
    monkeypatch.setattr(debian_part, "fetch_debs", lambda locks, mirror, out: {"debian/pool/main/a/apt.deb": "a"})
    return asked


def test_making_it_resolves_trixie_with_apptainers_depends_and_keeps_the_result(tmp_path, monkeypatch):
    deb = deb_with_control(CONTROL)
    asked = _fake_sources(monkeypatch, deb)
    files = toolbox_part.make(tmp_path, "http://mirror.test/debian/", Progress(), machine="x86_64")
    pool = f"pool/main/a/apptainer/apptainer_{toolbox.APPTAINER_VERSION}_amd64.deb"
    assert asked[0] == f"http://mirror.test/debian/{pool}"
    suite, arch, mirror, names = asked[1]
    assert (suite, arch, mirror) == ("trixie", "amd64", "http://mirror.test/debian")
    assert {"ca-certificates", "debootstrap", "squashfs-tools", "init-system-helpers", "libseccomp2"} <= set(names)
    lock = read_debian(tmp_path / "toolbox/debian-trixie-amd64.txt", "toolbox")
    assert [p.name for p in lock.packages] == ["apt", "libc6"] and lock.suite == "trixie" and lock.pockets == ()
    assert files[f"debian/{pool}"] == hashlib.sha256(deb).hexdigest()
    assert {"toolbox/debian-trixie-amd64.txt", "debian/dists/trixie/Release", "debian/pool/main/a/apt.deb"} <= set(
        files
    )


def test_a_bundle_without_a_toolbox_passes_and_one_without_its_apptainer_is_refused(tmp_path, monkeypatch):
    toolbox_part.check(tmp_path, {"debian/dists/bookworm/Release": "0" * 64}, machine="x86_64")
    lock = tmp_path / "toolbox" / "debian-trixie-amd64.txt"
    lock.parent.mkdir()
    lock.write_text("# debian: trixie amd64 main\n# pockets: \n# asked: \n")
    monkeypatch.setattr(debian_part, "check_against_locks", lambda locks, bundle, files: None)
    files = {"toolbox/debian-trixie-amd64.txt": "1" * 64}
    with pytest.raises(ToolError) as caught:
        toolbox_part.check(tmp_path, files, machine="x86_64")
    message = str(caught.value)
    assert message.startswith(f"{tmp_path}/debian/pool/main/a/apptainer/apptainer_") and "\n" not in message
    files[toolbox_part.apptainer_path("x86_64")] = toolbox.APPTAINER_SHA256["x86_64"]
    toolbox_part.check(tmp_path, files, machine="x86_64")


def test_a_toolbox_for_an_unknown_architecture_is_refused():
    with pytest.raises(ToolError, match="no toolbox for riscv64"):
        toolbox_part.lock_path("riscv64")


def test_provisioning_from_a_bundle_without_a_toolbox_is_one_line(tmp_path):
    (tmp_path / "locks").mkdir()
    (tmp_path / "locks" / "x.txt").write_text("x\n")
    manifest.write(tmp_path, {"locks/x.txt": hashlib.sha256(b"x\n").hexdigest()})
    result = run_builder("toolbox", "provision", "--bundle", tmp_path, env={"XDG_CACHE_HOME": str(tmp_path / "c")})
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {tmp_path}: holds no Apptainer toolbox for "), lines
    assert not (tmp_path / "c" / "hpc-ml-containers" / "toolbox").exists()


def test_bundle_goes_with_provision_only(tmp_path):
    result = run_builder("toolbox", "status", "--bundle", tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == "error: command line: --bundle goes with provision, not status"


def test_provisioning_from_a_folder_that_is_no_bundle_is_a_usage_error(tmp_path):
    result = run_builder("toolbox", "provision", "--bundle", tmp_path, env={"XDG_CACHE_HOME": str(tmp_path / "c")})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: command line: {tmp_path}: no SHA256SUMS there, so not a bundle; make one with: "
        f"hpcml bundle TARGET --out {tmp_path}"
    ]
    assert not (tmp_path / "c").exists()
