"""host.route_facts: what a host offers a build, each probe run for real (user namespaces,
a setuid starter, proot's statx translation, SingularityCE's version)."""

import subprocess

import pytest

from builder.host import route_facts


def test_the_facts_of_this_host_are_read_without_failing():
    facts = route_facts.facts()
    # this machine: user namespaces open (unshare -U -r), as the kernel and `unshare` say
    unshared = subprocess.run(["unshare", "--user", "--map-root-user", "true"], capture_output=True, check=False)
    assert facts.userns is (unshared.returncode == 0)


def test_a_setuid_starter_is_found_where_source_and_distribution_installs_put_it(tmp_path):
    for prefix, starter in (
        ("opt/apptainer", "libexec/apptainer/bin/starter-suid"),
        ("usr", "lib/x86_64-linux-gnu/apptainer/bin/starter-suid"),
    ):
        (tmp_path / prefix / starter).parent.mkdir(parents=True)
        (tmp_path / prefix / starter).write_text("")
        (tmp_path / prefix / "bin").mkdir()
        command = tmp_path / prefix / "bin" / "apptainer"
        command.write_text("")
        assert not route_facts._setuid_starter(str(command))  # not setuid
        (tmp_path / prefix / starter).chmod(0o4755)  # root owns it: the tests run as root
        assert route_facts._setuid_starter(str(command))


def _fake_proot(path, binds: bool):
    """A proot stand-in: its -b binds made real by a mount namespace (the tests run as root),
    or ignored (as proot 5.1 leaves statx's path untranslated)."""
    mount = 'mkdir "${bind#*:}" && mount --bind "${bind%%:*}" "${bind#*:}"' if binds else "true"
    unmount = 'umount "${bind#*:}"; rmdir "${bind#*:}"' if binds else "true"  # the mount point too
    path.write_text(
        "#!/bin/bash\n"
        f'if [ -z "${{INSIDE:-}}" ]; then exec env INSIDE=1 unshare -m --propagation private "$0" "$@"; fi\n'
        f'bind="$2"; shift 2; {mount}; "$@"; status=$?; {unmount}; exit $status\n'
    )
    path.chmod(0o755)
    return str(path)


def test_the_statx_probe_tells_a_proot_that_maps_the_path_from_one_that_does_not(tmp_path):
    assert route_facts.proot_settings(None) is None
    assert route_facts.proot_settings(_fake_proot(tmp_path / "good", binds=True)) == {}
    assert route_facts.proot_settings(_fake_proot(tmp_path / "old", binds=False)) is None
    assert not route_facts.translates_statx(_fake_proot(tmp_path / "old2", binds=False))
    assert not (route_facts.Path("/") / route_facts.STATX_PROBE.lstrip("/")).exists()


@pytest.mark.parametrize(
    "said, builds",
    [
        ("singularity-ce version 4.1.3-jammy", True),
        ("singularity-ce version 3.11.0", True),
        ("singularity-ce version 3.10.5", False),
        ("apptainer version 1.4.5", False),
        ("singularity version 3.8.7", False),  # the older Singularity, before the CE/Apptainer split
    ],
)
def test_a_proot_capable_runtime_is_told_by_its_version(tmp_path, said, builds):
    runtime = tmp_path / "singularity"
    runtime.write_text(f"#!/bin/sh\necho '{said}'\n")
    runtime.chmod(0o755)
    assert route_facts.builds_under_proot(str(runtime)) is builds
    assert route_facts.builds_under_proot(None) is False
