"""builder/host/emulation.py: whether this host can run another architecture's programs while
an image builds, read from a binfmt_misc folder and a binfmt.d folder made in tmp_path. The
real registration and an emulated build are in tests/images/test_emulated_image.py."""

import pytest
from helpers.fake_runner import FakeRunner

from builder.errors import ToolError
from builder.host import emulation

CONF = r":qemu-aarch64:M::\x7f\x45\x4c\x46\x02\x01\x01:\xff\xff\xff:/usr/libexec/qemu-binfmt/aarch64-binfmt-P:OPF"


@pytest.fixture
def host(monkeypatch, tmp_path):
    """An x86_64 host with empty binfmt_misc and binfmt.d folders, as root."""
    monkeypatch.setattr(emulation, "BINFMT", tmp_path / "binfmt_misc")
    monkeypatch.setattr(emulation, "CONF_DIR", tmp_path / "binfmt.d")
    monkeypatch.setattr(emulation, "host_arch", lambda: "x86_64")
    monkeypatch.setattr(emulation.os, "geteuid", lambda: 0)
    (tmp_path / "binfmt_misc").mkdir()
    (tmp_path / "binfmt.d").mkdir()
    return tmp_path


def registered(host, first="enabled", flags="POF"):
    entry = host / "binfmt_misc" / "qemu-aarch64"
    entry.write_text(f"{first}\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\nflags: {flags}\noffset 0\n")


def test_the_hosts_own_architecture_needs_nothing(host):
    assert emulation.state("x86_64") == ("native", "not needed (x86_64 host)")
    emulation.ensure("x86_64")


def test_a_registration_with_the_f_flag_is_ready(host):
    registered(host)
    assert emulation.state("aarch64") == (
        "ready",
        "registered for aarch64: /usr/libexec/qemu-binfmt/aarch64-binfmt-P (flags POF)",
    )
    emulation.ensure("aarch64")


@pytest.mark.parametrize(
    "first, flags, says", [("enabled", "OC", "without the F flag"), ("disabled", "POF", "disabled")]
)
def test_a_registration_that_cannot_serve_a_build_is_named_with_its_remedy(host, first, flags, says):
    registered(host, first, flags)
    kind, why = emulation.state("aarch64")
    assert kind == "missing" and says in why and "echo -1 >" in why
    with pytest.raises(ToolError, match="needs QEMU user-mode emulation: qemu-aarch64 is registered"):
        emulation.ensure("aarch64")


def test_without_qemu_the_error_says_what_to_install_in_one_line(host):
    with pytest.raises(ToolError) as error:
        emulation.ensure("aarch64")
    assert str(error.value) == (
        "building an aarch64 image on this x86_64 host needs QEMU user-mode emulation: "
        "no QEMU user-mode emulator for aarch64: apt-get install qemu-user-static"
    )


def test_only_root_can_register_an_installed_emulator(host, monkeypatch):
    (host / "binfmt.d" / "qemu-aarch64.conf").write_text(f"# from qemu-user-static\n{CONF}\n")
    assert emulation.state("aarch64")[0] == "can register"
    monkeypatch.setattr(emulation.os, "geteuid", lambda: 1000)
    assert emulation.state("aarch64") == (
        "missing",
        "qemu-user-static is installed but not registered, and only root can register it",
    )


def test_registering_mounts_binfmt_misc_when_needed_and_writes_the_conf_line(host, monkeypatch):
    (host / "binfmt.d" / "qemu-aarch64.conf").write_text(f"# from qemu-user-static\n{CONF}\n")
    fake = FakeRunner(monkeypatch)
    # the kernel makes the entry when the line is written; a file stands in for register here
    emulation._register("aarch64")
    assert fake.commands == [["mount", "-t", "binfmt_misc", "binfmt_misc", str(host / "binfmt_misc")]]
    assert (host / "binfmt_misc" / "register").read_text() == CONF + "\n"
    emulation._register("aarch64")  # mounted now: no second mount
    assert len(fake.commands) == 1


def test_a_newer_qemu_is_registered_under_its_own_name_ahead_of_the_hosts(host, monkeypatch):
    (host / "binfmt.d" / "qemu-aarch64.conf").write_text(f"{CONF}\n")
    (host / "binfmt_misc" / "register").write_text("")  # mounted
    FakeRunner(monkeypatch)
    newer = host / "cross/usr/libexec/qemu-binfmt/aarch64-binfmt-P"
    emulation.use_newer("aarch64", newer)
    name, interpreter = ":hpcml-qemu-aarch64:", f":{newer}:OPF"
    line = (host / "binfmt_misc" / "register").read_text()
    assert (
        line
        == CONF.replace(":qemu-aarch64:", name).replace(":/usr/libexec/qemu-binfmt/aarch64-binfmt-P:OPF", interpreter)
        + "\n"
    )
    # registered already (the kernel's entry file): nothing is written again
    (host / "binfmt_misc" / "register").write_text("")
    entry = host / "binfmt_misc" / "hpcml-qemu-aarch64"
    entry.write_text(f"enabled\ninterpreter {newer}\nflags: POF\n")
    emulation.use_newer("aarch64", newer)
    assert (host / "binfmt_misc" / "register").read_text() == ""
    # another cache's QEMU: its entry is removed, this one registered
    emulation.use_newer("aarch64", host / "other/aarch64-binfmt-P")
    assert (
        entry.read_text() == "-1\n" and "other/aarch64-binfmt-P:OPF" in (host / "binfmt_misc" / "register").read_text()
    )
