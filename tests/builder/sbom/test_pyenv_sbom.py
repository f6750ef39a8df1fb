"""A project env's SBOM (sbom/pyenv_document.py), `hpcml diff` of two envs by their files, and
`hpcml verify --lock ENV.sqsh` against its lock: envs made here from a record and a lock, packed
by mksquashfs (make setup-test), as `hpcml env build` leaves them."""

import json
import subprocess

import pytest
from helpers.cli_here import run_here

from builder import pyenv_lock
from builder.lockfile import Pinned
from builder.sbom import pyenv_document

HEX = "ab" * 32


def lock_of(pins):
    return pyenv_lock.PyenvLock(
        "cpu", "3.11", "x86_64-manylinux_2_36", HEX, "requirements.txt", ("alpha",),
        tuple(Pinned(name, version, (HEX,), (f"{name}-{version}-py3-none-any.whl",)) for name, version in pins),
    )  # fmt: skip


def facts_of(lock):
    return {
        "target": "cpu",
        "image_distributions_sha256": "cd" * 32,
        "python": "3.11",
        "lock_sha256": "ef" * 32,
        "python_lock": lock.image_lock,
        "distributions": [[pin.name, pin.version] for pin in lock.pins],
    }


def env_files(folder, name, pins):
    """folder/NAME.lock, NAME.sqsh (its record inside) and NAME.sbom.json."""
    lock = lock_of(pins)
    (folder / f"{name}.lock").write_text(lock.text("hpcml env lock"))
    content = folder / f"{name}-content"
    content.mkdir()
    (content / "hpcml-pyenv.json").write_text(json.dumps(facts_of(lock)))
    out = folder / f"{name}.sqsh"
    subprocess.run(["mksquashfs", content, out, "-noappend", "-quiet", "-no-progress"], check=True)
    (folder / f"{name}.sbom.json").write_text(pyenv_document.render(lock, facts_of(lock), out.name))
    return out


def test_the_sbom_names_each_distribution_with_its_file_hash_and_the_image_and_is_the_same_each_time():
    lock = lock_of([("alpha", "1.0"), ("beta", "2.0")])
    text = pyenv_document.render(lock, facts_of(lock), "requirements.cpu.sqsh")
    assert text == pyenv_document.render(lock, facts_of(lock), "requirements.cpu.sqsh")
    document = json.loads(text)
    assert [(c["purl"], c["hashes"][0]["content"]) for c in document["components"]] == [
        ("pkg:pypi/alpha@1.0", HEX),
        ("pkg:pypi/beta@2.0", HEX),
    ]
    subject = document["metadata"]["component"]
    properties = {p["name"]: p["value"] for p in subject["properties"]}
    assert subject["name"] == "requirements.cpu.sqsh" and properties["hpcml:target"] == "cpu"
    assert properties["hpcml:image-distributions-sha256"] == "cd" * 32
    assert document["metadata"]["timestamp"].startswith("2026-01-01T00:00:00")


def test_diff_of_two_envs_by_their_files_lists_what_moved(tmp_path):
    before = env_files(tmp_path, "before", [("alpha", "1.0"), ("beta", "2.0")])
    after = env_files(tmp_path, "after", [("alpha", "1.1"), ("gamma", "0.1")])
    result = run_here("diff", before, after, "--exit-code")
    assert result.returncode == 1, result.stderr
    for line in ("changed  alpha 1.0 -> 1.1", "removed  beta 2.0", "added    gamma 0.1"):
        assert line in result.stdout


def test_verify_lock_of_an_env_reads_what_the_file_holds_against_the_lock_beside_it(tmp_path):
    env = env_files(tmp_path, "requirements.cpu", [("alpha", "1.0")])
    result = run_here("verify", "--lock", env)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{env} matches the lock of {tmp_path}/requirements.cpu.lock: 1 Python distributions\n"
    (tmp_path / "other.lock").write_text(lock_of([("alpha", "1.1")]).text("hpcml env lock"))
    result = run_here("verify", "--lock", env, "--pyenv-lock", tmp_path / "other.lock")
    assert result.returncode == 1
    assert result.stdout == "alpha is 1.0 in the env, 1.1 in the env lock\n"


@pytest.mark.parametrize("args", [["--pyenv-lock", "x.lock"]])
def test_pyenv_lock_goes_with_an_env_alone(args, tmp_path):
    result = run_here("verify", "--lock", tmp_path / "cpu.sbom.json", *args)
    assert result.returncode == 2 and "--pyenv-lock goes with --lock ENV.sqsh" in result.stderr
