"""Which registry a base image comes from, and what the build asks of each source."""

import pytest

from builder.layerbuild import sources


@pytest.mark.parametrize(
    ("image", "host"),
    [
        ("rocm/dev-ubuntu-24.04:7.0.2-complete", "registry-1.docker.io"),
        ("debian", "registry-1.docker.io"),
        ("ghcr.io/org/image:tag", "ghcr.io"),
        ("127.0.0.1:9/rocm/dev-ubuntu-24.04:7.0.2", "127.0.0.1:9"),
        ("localhost/image", "localhost"),
    ],
)
def test_the_registry_of_a_docker_reference(image, host):
    assert sources.registry(image) == host
