"""The torch block alone, on targets of the test's own (tests/helpers/mini_target.py)."""

from helpers.mini_target import cuda_changes, mini_target, rocm_changes

from builder.render.blocks import torch


def test_a_cpu_torch_comes_from_the_index_named_as_its_flavour_and_is_checked(tree):
    build, final = torch.parts(mini_target(tree))
    pin, cpu_index = tree.versions.data["python_packages"]["torch"], tree.versions.data["torch_index"]["cpu"]
    assert [(p.block, p.stage, p.packages) for p in (build, final)] == [("torch", "build", ()), ("torch", "final", ())]
    assert build.pip_indexes == (cpu_index,) and build.post[0] == f"set -- --extra-index-url {cpu_index}"
    assert f"pip install --no-cache-dir torch=={pin} " + '"$@"' in build.post
    # the same check where torch is installed and in %test; no GPU arch to compile for
    assert build.post[-1].endswith(f" {pin} cpu") and final.test == (build.post[-1],)
    assert build.build_env == final.env == ()


def test_a_cuda_torch_compiles_for_every_sites_arch(tree):
    build, final = torch.parts(mini_target(tree, cuda_changes(), sites=("mahti", "jean-zay-h100")))
    assert build.build_env == final.env == (("TORCH_CUDA_ARCH_LIST", "8.0;9.0"),)
    assert build.post[-1].endswith(" cuda")


def test_a_rocm_torch_takes_the_recipes_version_and_index_and_its_sites_arch(tree):
    build, final = torch.parts(mini_target(tree, rocm_changes(), sites=("lumi",)))
    assert final.env == (("PYTORCH_ROCM_ARCH", "gfx90a"),)
    assert build.pip_indexes == (tree.versions.data["torch_index"]["rocm7.0"],)
    assert 'pip install --no-cache-dir torch==2.10.0 "$@"' in build.post
    assert final.test[0].endswith(" 2.10.0 rocm")
