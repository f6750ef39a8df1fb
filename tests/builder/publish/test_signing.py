"""Signed images (issue 35): `sign` with a PEM private key, `publish --key` and `verify` with
its public half, on the real CPU image and the real `apptainer sign`/`verify`; keys made by
openssl here. Unit tests first (no image), then the image's."""

import hashlib
import json
import os
import shutil
import subprocess

import pytest
from conftest import run_builder
from helpers.cli_here import run_here
from helpers.publishing import publish

from builder.host import sidecar
from builder.publish import signing


def make_key(folder, name):
    """(private, public) PEM files of a new RSA key."""
    private, public = folder / f"{name}.pem", folder / f"{name}.pub.pem"
    subprocess.run(
        ["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", private],
        check=True,
        capture_output=True,
        timeout=60,
    )
    subprocess.run(["openssl", "pkey", "-in", private, "-pubout", "-out", public], check=True, timeout=60)
    return private, public


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    folder = tmp_path_factory.mktemp("keys")
    return {name: make_key(folder, name) for name in ("admin", "other")}


def flip_byte(path, offset):
    with open(path, "r+b") as handle:
        handle.seek(offset)
        byte = handle.read(1)
        handle.seek(offset)
        handle.write(bytes([byte[0] ^ 0xFF]))


# --- no image ---------------------------------------------------------------------------------


def test_the_fingerprint_is_openssls_sha256_of_the_public_key(keys):
    _, public = keys["admin"]
    der = subprocess.run(
        ["openssl", "pkey", "-pubin", "-in", public, "-outform", "DER"], capture_output=True, check=True
    )
    assert signing.fingerprint(public) == "SHA256:" + hashlib.sha256(der.stdout).hexdigest()
    assert signing.fingerprint(public) != signing.fingerprint(keys["other"][1])


@pytest.mark.parametrize(
    "command, key, message",
    [
        ("publish", "private", "not a PEM public key (-----BEGIN PUBLIC KEY-----); expected a private key; give its "),
        ("publish", "garbage", "not a PEM public key (-----BEGIN PUBLIC KEY-----); expected made with: openssl pkey"),
        ("publish", "missing", "cannot read the key (No such file or directory); expected a PEM key file"),
        ("verify", "private", "not a PEM public key"),
        ("sign", "public", "not a PEM private key (-----BEGIN PRIVATE KEY-----)"),
        ("sign", "missing", "cannot read the key"),
    ],
)
def test_a_wrong_key_file_is_one_line_exit_2_and_writes_nothing(keys, tmp_path, command, key, message):
    private, public = keys["admin"]
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a key\n")
    path = {"private": private, "public": public, "garbage": garbage, "missing": tmp_path / "none.pem"}[key]
    prefix, images = tmp_path / "appl", tmp_path / "images"
    args = {
        "publish": ["publish", "cpu", "--prefix", prefix, "--images", images, "--key", path],
        "verify": ["verify", "--prefix", prefix, "pytorch/1.0", "--key", path],
        "sign": ["sign", "cpu", "--images", images, "--key", path],
    }[command]
    result = run_here(*args)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert not prefix.exists() and not images.exists()


# --- the CPU image ------------------------------------------------------------------------------


@pytest.fixture
def signed(cpu_image, apptainer, keys, tmp_path):
    """A copy of the CPU image (with its layer record) in a folder of its own, signed with
    the admin's key by `sign`; a hard link beside it stands for the layer cache's copy."""
    images = tmp_path / "images"
    images.mkdir()
    image = images / "cpu.sif"
    shutil.copyfile(cpu_image, image)
    shutil.copyfile(cpu_image.with_name("cpu.sif.json"), images / "cpu.sif.json")
    os.utime(image, ns=(image.stat().st_atime_ns, cpu_image.stat().st_mtime_ns))
    record = json.loads((images / "cpu.sif.json").read_text())
    record.update(size=image.stat().st_size, mtime_ns=image.stat().st_mtime_ns)
    (images / "cpu.sif.json").write_text(json.dumps(record))
    cached = tmp_path / "cache-copy.sif"
    os.link(image, cached)
    before = cached.read_bytes()[-65536:]
    result = run_builder(
        "sign", "cpu", "--images", images, "--key", keys["admin"][0], env={"HPCML_APPTAINER": apptainer}
    )
    assert result.returncode == 0, result.stderr
    assert "run its smoke tests now" in result.stdout
    assert cached.read_bytes()[-65536:] == before and os.stat(cached).st_nlink == 1  # the cache's copy untouched
    assert sidecar.current_key(image) == record["key"]  # `build` still takes it as built
    return image


def test_a_signed_image_publishes_and_its_module_names_digest_and_key(signed, keys, apptainer, tmp_path):
    prefix = tmp_path / "appl"
    _, public = keys["admin"]
    env = {"HPCML_APPTAINER": apptainer}
    result = publish(signed, prefix, "--version", "1.0", "--skip-smoke", "--key", public, env=env)
    assert result.returncode == 0, result.stderr
    fingerprint = signing.fingerprint(public)
    assert f"signature: verified against {public} ({fingerprint})" in result.stdout
    root = prefix / "pytorch" / "1.0"
    digest = subprocess.run(["sha256sum", root / "image.sif"], capture_output=True, text=True).stdout.split()[0]
    lua = (root / "module.lua").read_text()
    assert f"Image sha256: {digest} (signed, verified against key {fingerprint} at publish)" in lua
    assert f'whatis("Image: sha256 {digest}; signing key {fingerprint}")' in lua
    assert json.loads((root / "publish.json").read_text())["signing_key"] == fingerprint
    assert (root / signing.PUBLIC_KEY).read_bytes() == public.read_bytes()
    ok = run_builder("verify", "--prefix", prefix, "pytorch/1.0", env=env)
    assert ok.returncode == 0 and f"signature verified (key {fingerprint})" in ok.stdout, ok.stdout + ok.stderr
    assert run_builder("verify", "--prefix", prefix, "pytorch/1.0", "--key", public, env=env).returncode == 0
    # the admin trusts another key: the version is not theirs
    other = run_builder("verify", "--prefix", prefix, "pytorch/1.0", "--key", keys["other"][1], env=env)
    assert other.returncode == 1 and f"published with signing key {fingerprint}, not" in other.stdout
    # the published image changed: its checksum and its signature both say so
    flip_byte(root / "image.sif", (root / "image.sif").stat().st_size // 2)
    bad = run_builder("verify", "--prefix", prefix, "pytorch/1.0", env=env)
    assert bad.returncode == 1 and "image.sif: changed" in bad.stdout
    assert "data object integrity compromised" in bad.stdout, bad.stdout


def test_a_tampered_signed_image_is_refused_at_publish_and_nothing_is_placed(signed, keys, apptainer, tmp_path):
    prefix = tmp_path / "appl"
    flip_byte(signed, signed.stat().st_size // 2)  # in the root filesystem's squashfs
    result = publish(signed, prefix, "--skip-smoke", "--key", keys["admin"][1], env={"HPCML_APPTAINER": apptainer})
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"error: {signed}: the image's signature does not verify against ")
    assert "data object integrity compromised" in result.stderr and result.stderr.count("\n") == 1
    assert not list(prefix.iterdir())  # the folder the admin made stays empty


def test_an_unsigned_image_and_another_keys_are_refused(signed, cpu_image, keys, apptainer, tmp_path):
    env = {"HPCML_APPTAINER": apptainer}
    prefix = tmp_path / "appl"
    unsigned = publish(cpu_image, prefix, "--skip-smoke", "--key", keys["admin"][1], env=env)
    assert unsigned.returncode == 2 and "signature not found" in unsigned.stderr, unsigned.stderr
    another = publish(signed, prefix, "--skip-smoke", "--key", keys["other"][1], env=env)
    assert another.returncode == 2 and "does not verify against" in another.stderr, another.stderr
    assert not list(prefix.iterdir())  # the folder the admin made stays empty
