"""The cuda_toolkit block alone, on targets of the test's own (tests/helpers/mini_target.py)."""

from helpers.mini_target import cuda_changes, mini_target

from builder.render.blocks import cuda_toolkit


def test_a_cpu_image_gets_no_toolkit(tree):
    assert cuda_toolkit.parts(mini_target(tree)) == []


def test_the_pypi_toolkit_is_pip_installed_and_linked_to_cuda_home(tree):
    (part,) = cuda_toolkit.parts(mini_target(tree, cuda_changes(), sites=("mahti",)))
    assert (part.block, part.stage, part.packages) == ("cuda_toolkit", "build", ())
    assert part.build_env == (("CUDA_HOME", "/opt/cuda"),)
    # curand for DeepSpeed's -lcurand; CCCL unpinned, so the one torch's NVSHMEM brings stays
    assert part.post[0] == (
        "pip install --no-cache-dir 'cuda-toolkit[nvcc,cudart,curand,profiler]==13.0.3' nvidia-cuda-cccl"
    )
    # pip puts CUDA 13 under nvidia/cu13, which torch does not look in
    assert "cu13" in part.post[1] and part.post[2] == 'ln -sfn "$cuda_home" /opt/cuda'
    assert part.post[-1] == "/opt/cuda/bin/nvcc --version"


def test_the_debian_toolkit_is_a_package_compiled_with_the_gcc_it_names(tree):
    debian = {
        **cuda_changes(),
        "cuda_toolkit": {"from": "debian", "gcc": "13"},
        "os": {"components": ["main", "contrib", "non-free"]},  # nvidia-cuda-toolkit is in non-free
    }
    (part,) = cuda_toolkit.parts(mini_target(tree, debian, sites=("puhti",)))
    assert part.packages == ("nvidia-cuda-toolkit", "g++-13")
    assert part.build_env == (("CUDA_HOME", "/usr"), ("CC", "gcc-13"), ("CXX", "g++-13"))
    assert part.post == ("nvcc --version",)
