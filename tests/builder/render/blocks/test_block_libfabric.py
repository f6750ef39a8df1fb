"""The libfabric block alone, on targets of the test's own (tests/helpers/mini_target.py)."""

from helpers.mini_target import cuda_changes, mini_target, rocm_changes

from builder.render.blocks import libfabric


def test_images_without_the_rccl_plugin_get_no_libfabric_of_their_own(tree):
    assert libfabric.parts(mini_target(tree)) == []
    assert libfabric.parts(mini_target(tree, cuda_changes(), sites=("mahti",))) == []


def test_the_cxi_stack_is_compiled_from_its_pinned_sources_in_a_kept_step(tree):
    build, _final = libfabric.parts(mini_target(tree, rocm_changes(), sites=("lumi",)))
    sources = tree.versions.data["sources"]
    assert (build.block, build.stage, build.kept.name) == ("libfabric", "build", "libfabric-cxi")
    assert set(libfabric.CXI_BUILD_PACKAGES) <= set(build.packages)
    assert len(build.git_sources) == 4
    assert sources["libfabric"]["git"] in build.git_sources
    assert any(
        line.startswith("./configure --prefix=/opt/libfabric ") and "--enable-cxi=/opt/libfabric" in line
        for line in build.kept.build
    )
    assert build.post[0] == "printf '%s\\n' /opt/libfabric/lib > /etc/ld.so.conf.d/hpcml-libfabric.conf"


def test_the_final_stage_copies_the_stack_registers_it_and_installs_its_run_time_packages(tree):
    build, final = libfabric.parts(mini_target(tree, rocm_changes(), sites=("lumi",)))
    assert (final.stage, final.packages, final.copy_from_build) == (
        "final",
        libfabric.CXI_RUN_PACKAGES,
        ("/opt/libfabric",),
    )
    assert final.post == build.post  # registered with the loader in both stages
