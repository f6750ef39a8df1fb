"""`hpcml lock lumi-rocm` where PyTorch's ROCm index answers, as on a LUMI login node: here a
stand-in index on loopback serves a `+rocm7.0` torch (and the ROCm triton it asks for) under
the index's path, and a wheel folder stands in for PyPI with each package the other steps
ask for. The lock keeps the ROCm build with its file's sha256 and name, never the address,
and the rendered build installs exactly that from it."""

import functools
import hashlib
import http.server
import shutil
import threading
import zipfile

import pytest
from conftest import ROOT
from helpers.cli_here import run_here
from helpers.pip_sources import POLL_S, serve, wheel

from builder.locking import python
from builder.recipes.tree import RecipeTree
from builder.render.layer_sharing import plan_layers

TORCH = "torch-2.10.0+rocm7.0-cp312-cp312-manylinux_2_28_x86_64.whl"
TRITON = "pytorch_triton_rocm-3.6.0-cp312-cp312-manylinux_2_28_x86_64.whl"


def platform_wheel(folder, file_name, requires=()):
    """A stand-in wheel of the image's platform (cp312, manylinux_2_28 x86_64)."""
    name, version = file_name.split("-")[:2]
    info = f"{name}-{version}.dist-info"
    path = folder / file_name
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    metadata += "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{name}/__init__.py", "")
        archive.writestr(f"{info}/METADATA", metadata)
        archive.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: cp312-cp312-manylinux_2_28_x86_64\n",
        )
        archive.writestr(f"{info}/RECORD", "")
    return path


def sdist(folder, name, version):
    """A stand-in source release whose metadata is static (PKG-INFO 2.2), which uv reads as
    it is: DeepSpeed is built from source in the image (--no-binary)."""
    import io
    import tarfile

    path = folder / f"{name}-{version}.tar.gz"
    base = f"{name}-{version}"
    files = {
        f"{base}/PKG-INFO": f"Metadata-Version: 2.2\nName: {name}\nVersion: {version}\n",
        f"{base}/pyproject.toml": '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "{name}"\nversion = "{version}"\n',
    }
    with tarfile.open(path, "w:gz") as archive:
        for member, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(member)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


# the real uv resolving six steps (about 90 s on 2 cores): `make test`, not `make unit`
pytestmark = pytest.mark.tools


@pytest.fixture
def rocm_index(tmp_path):
    """A PEP 503 index at http://127.0.0.1:PORT/whl/rocm7.0/ serving the stand-in torch and
    triton, as download.pytorch.org/whl/rocm7.0 does."""
    root = tmp_path / "index"
    files = root / "files"
    files.mkdir(parents=True)
    torch = platform_wheel(files, TORCH, ["pytorch-triton-rocm==3.6.0", "filelock"])
    triton = platform_wheel(files, TRITON)
    for project, path in (("torch", torch), ("pytorch-triton-rocm", triton)):
        page = root / "whl" / "rocm7.0" / project
        page.mkdir(parents=True)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        page.joinpath("index.html").write_text(
            f'<a href="../../../files/{path.name}#sha256={digest}">{path.name}</a>\n'
        )
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": POLL_S}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/whl/rocm7.0", torch, triton
    server.shutdown()


@pytest.fixture
def sources(tmp_path, monkeypatch):
    yield from serve(tmp_path, monkeypatch)


def test_lumi_rocm_locks_the_rocm_torch_by_hash_and_builds_from_the_lock(tmp_path, rocm_index, sources):
    url, torch, triton = rocm_index
    recipes = shutil.copytree(ROOT / "recipes", tmp_path / "recipes")
    versions = recipes / "versions.yaml"
    versions.write_text(versions.read_text().replace("https://download.pytorch.org/whl/rocm7.0", url))
    assert not (recipes / "locks" / "lumi-rocm").exists()  # unlocked, as in the repository
    base, top = python.requests(RecipeTree(recipes).target("lumi-rocm"))
    for request in (*base, *top):  # PyPI's part: each package a step asks for, as asked
        for requirement in request.requirements:
            name, version = requirement.split("==")
            if name == "deepspeed":
                sdist(sources, name, version)
            elif name != "torch":
                wheel(sources, name, version)
    wheel(sources, "filelock", "3.20.0")

    result = run_here("--recipes", recipes, "lock", "lumi-rocm")
    assert result.returncode == 0, result.stderr
    lock = (recipes / "locks" / "lumi-rocm" / "python.txt").read_text()
    assert "# platform: python 3.12, x86_64-manylinux_2_39\n" in lock  # ROCm 7.0's Ubuntu 24.04
    sha = {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in (torch, triton)}
    assert f"torch==2.10.0+rocm7.0 --hash=sha256:{sha[torch]}  # {TORCH}" in lock
    assert f"pytorch-triton-rocm==3.6.0 --hash=sha256:{sha[triton]}" in lock
    pins = [line for line in lock.splitlines() if not line.startswith("#")]
    assert not [line for line in pins if "127.0.0.1" in line or str(tmp_path) in line]  # names, not addresses
    assert "deepspeed==0.19.8 --hash=sha256:" in lock and "filelock==3.20.0" in lock

    devel = plan_layers(RecipeTree(recipes), "lumi-rocm")["devel"].text
    torch_step = devel.split("echo '--- devel: torch'", 1)[1].split("echo '---", 1)[0]
    assert f"torch==2.10.0+rocm7.0 --hash=sha256:{sha[torch]}" in torch_step
    assert "pip install --no-cache-dir --no-deps --require-hashes -r" in torch_step
    assert f"--extra-index-url {url}" in torch_step

    again = run_here("--recipes", recipes, "lock", "lumi-rocm")
    assert again.returncode == 0 and "unchanged" in again.stdout, again.stderr
