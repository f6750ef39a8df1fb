"""The os block (os_packages.py) alone, on targets of the test's own (tests/helpers/mini_target.py)."""

from helpers.mini_target import mini_target

from builder.render.blocks import os_packages


def test_a_stage_nobody_asked_packages_for_gets_no_part(tree):
    assert os_packages.parts(mini_target(tree), {"build": set(), "final": set()}) == []
    (part,) = os_packages.parts(mini_target(tree), {"build": {"make"}, "final": set()})
    assert (part.block, part.stage) == ("os", "build")


def test_each_stage_installs_its_wishes_once_sorted_in_one_apt_get(tree):
    wanted = {"build": {"make", "g++", "python3"}, "final": {"python3"}}
    build, final = os_packages.parts(mini_target(tree), wanted)
    assert build.build_env == (("DEBIAN_FRONTEND", "noninteractive"),)
    assert build.post == (
        "apt-get update",
        "apt-get install -y --no-install-recommends g++ make python3",
        "apt-get clean",
        "rm -rf /var/lib/apt/lists/*",
    )
    assert final.post[1] == "apt-get install -y --no-install-recommends python3"
    # the os block installs them itself; it asks nobody for packages
    assert build.packages == final.packages == ()


def test_archive_areas_beyond_main_are_enabled_before_the_install(tree):
    target = mini_target(tree, {"os": {"components": ["main", "contrib", "non-free"]}})
    (part,) = os_packages.parts(target, {"build": {"make"}, "final": set()})
    sources_list, deb822 = part.post[:2]
    assert "main contrib non-free" in sources_list and "/etc/apt/sources.list;" in sources_list
    assert "Components: main contrib non-free" in deb822
    assert part.post[2] == "apt-get update"


def _with_lock(tree, stage="final"):
    from dataclasses import replace

    from builder.lockfile import DebianLock, DebPackage

    packages = (
        DebPackage("libc6", "2.36-9+deb12u13", "amd64"),
        DebPackage("libc6-dev", "2.36-9+deb12u13", "amd64"),
        DebPackage("python3", "3.11.2-1+b1", "amd64"),
        DebPackage("zlib1g", "1:1.2.13.dfsg-1", "amd64"),
    )
    lock = DebianLock(stage, "bookworm", "amd64", ("main",), ("python3",), packages, "/elsewhere/debian-final.txt")
    return replace(mini_target(tree), debian_locks=(lock,))


def test_with_a_lock_apt_installs_the_locked_versions_and_checks_the_root(tree):
    (part,) = os_packages.parts(_with_lock(tree), {"build": set(), "final": {"python3"}})
    post = part.post
    start, end = post.index("printf '%s\\n' \\"), post.index('    > "$lock"')
    # every locked package, sorted as C-locale sort and comm expect them ('-' before '=')
    listed = [line.strip().removesuffix(" \\").strip("'") for line in post[start + 1 : end]]
    assert listed == [
        "libc6-dev=2.36-9+deb12u13",
        "libc6=2.36-9+deb12u13",
        "python3=3.11.2-1+b1",
        "zlib1g=1:1.2.13.dfsg-1",
    ]
    assert "apt-get install -y --no-install-recommends python3=3.11.2-1+b1" in post
    # the dependencies are held by a preferences file that is gone before the layer ends
    pin = next(line for line in post if line.startswith("sed -E"))
    assert "Pin-Priority: 1001" in pin and pin.endswith(f"> {os_packages.PREFERENCES}")
    assert post.index(pin) < post.index("apt-get install -y --no-install-recommends python3=3.11.2-1+b1")
    assert f"rm -f {os_packages.PREFERENCES}" in post
    assert any("comm -23" in line for line in post) and any("exit 1; fi" in line for line in post)
    # no machine path of the lock goes into the definition
    assert not any("/elsewhere" in line for line in post)
    assert post[-2:] == ("apt-get clean", "rm -rf /var/lib/apt/lists/*")


def test_a_stage_without_a_lock_of_its_own_installs_as_asked(tree):
    build, _ = os_packages.parts(_with_lock(tree, stage="final"), {"build": {"make"}, "final": {"python3"}})
    assert build.post[1] == "apt-get install -y --no-install-recommends make"


def test_a_package_the_lock_lacks_is_installed_unpinned_for_the_stale_lock_check_to_refuse(tree):
    (part,) = os_packages.parts(_with_lock(tree), {"build": set(), "final": {"python3", "vim"}})
    assert "apt-get install -y --no-install-recommends python3=3.11.2-1+b1 vim" in part.post
