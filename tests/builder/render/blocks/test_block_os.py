"""The os block alone, on targets of the test's own (tests/helpers/mini_target.py)."""

from helpers.mini_target import mini_target

from builder.render.blocks import os


def test_a_stage_nobody_asked_packages_for_gets_no_part(tree):
    assert os.parts(mini_target(tree), {"build": set(), "final": set()}) == []
    (part,) = os.parts(mini_target(tree), {"build": {"make"}, "final": set()})
    assert (part.block, part.stage) == ("os", "build")


def test_each_stage_installs_its_wishes_once_sorted_in_one_apt_get(tree):
    wanted = {"build": {"make", "g++", "python3"}, "final": {"python3"}}
    build, final = os.parts(mini_target(tree), wanted)
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
    (part,) = os.parts(target, {"build": {"make"}, "final": set()})
    sources_list, deb822 = part.post[:2]
    assert "main contrib non-free" in sources_list and "/etc/apt/sources.list;" in sources_list
    assert "Components: main contrib non-free" in deb822
    assert part.post[2] == "apt-get update"
