"""The rccl_ofi block alone, on targets of the test's own (tests/helpers/mini_target.py)."""

import dataclasses
import types

from helpers.mini_target import cuda_changes, mini_target, rocm_changes

from builder.render.blocks import rccl_ofi


def test_images_without_the_rccl_plugin_get_nothing(tree):
    assert rccl_ofi.parts(mini_target(tree)) == []
    assert rccl_ofi.parts(mini_target(tree, cuda_changes(), sites=("mahti",))) == []


def test_the_plugin_is_built_on_the_images_cxi_libfabric_and_preloads_the_images_rccl(tree):
    build, final = rccl_ofi.parts(mini_target(tree, rocm_changes(), sites=("lumi",)))
    assert (build.block, build.stage, build.kept.name) == ("rccl_ofi", "build", "aws-ofi-nccl")
    assert any("--with-libfabric=/opt/libfabric" in line for line in build.kept.build)
    assert "libfabric-dev" not in build.packages and final.packages == ("libhwloc15",)
    assert final.copy_from_build == ("/opt/aws-ofi-nccl",)
    assert final.env == (
        ("LD_PRELOAD", "/opt/rocm/lib/librccl.so.1"),
        ("NCCL_NET_PLUGIN", "/opt/aws-ofi-nccl/lib/librccl-net.so"),
    )
    assert final.test[-1].endswith("--libfabric /opt/libfabric/lib/libfabric.so.1 --provider cxi")


def test_without_a_cxi_stack_the_plugin_uses_the_distributions_libfabric(tree):
    # lumi itself asks for the image's libfabric: a lumi of the test's own that binds the host's
    lumi = tree.sites["lumi"]
    host_lumi = dataclasses.replace(lumi, network=dataclasses.replace(lumi.network, libfabric="host"))
    own_tree = types.SimpleNamespace(sites={"lumi": host_lumi}, versions=tree.versions, ds_ops=tree.ds_ops)
    changes = {**rocm_changes(), "comm": {"library": "rccl", "plugin": "aws-ofi-nccl"}}
    build, final = rccl_ofi.parts(mini_target(own_tree, changes, sites=("lumi",)))
    assert any("--with-libfabric=/usr " in line for line in build.kept.build)
    assert "libfabric-dev" in build.packages and final.packages == ("libhwloc15", "libfabric1")
    assert not any("--provider cxi" in line for line in final.test)
