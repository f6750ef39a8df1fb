"""locking/pyenv.py and pyenv_lock.py: a project env's requirements resolved by the real uv
against the CPU image's lock (its pins held), from a wheel folder of the test's own and an
index on loopback that serves nothing; the conflict lines, the requirement files, the lock's
format and the command's refusals. No network: the image lock's own extra index (PyTorch's)
is taken as not answering."""

import hashlib
from pathlib import Path

import pytest
from helpers.cli_here import run_here
from helpers.pip_sources import serve, wheel

from builder import pyenv_lock
from builder.errors import RecipeError
from builder.locking import pyenv


@pytest.fixture
def sources(tmp_path, monkeypatch):
    monkeypatch.setattr(pyenv.pip_indexes, "indexes_down", lambda urls, progress=None: list(urls))
    yield from serve(tmp_path, monkeypatch)


def lock_of(tree, tmp_path, text, name="requirements.txt"):
    path = tmp_path / name
    path.write_text(text)
    return pyenv.lock_pyenv(tree, "cpu", path)


def test_the_lock_holds_what_the_image_lacks_with_each_files_sha256_and_the_image_it_is_for(sources, tree, tmp_path):
    files = {
        "alpha": wheel(sources, "alpha", "1.0", ["beta>=1", "numpy>=2"]),
        "beta": wheel(sources, "beta", "1.2"),
    }
    wheel(sources, "numpy", "2.4.6")  # the image's own, which the env must not take again
    wheel(sources, "numpy", "2.5.0")  # newer than the image's: the resolve must not move to it
    lock = lock_of(tree, tmp_path, "alpha==1.0  # our model code\n\nnumpy\n")
    assert [(p.name, p.version) for p in lock.pins] == [("alpha", "1.0"), ("beta", "1.2")]
    for pin in lock.pins:
        assert pin.hashes == (hashlib.sha256(files[pin.name].read_bytes()).hexdigest(),)
        assert pin.files == (files[pin.name].name,)
    image_lock = (Path(tree.root) / "locks" / "cpu" / "python.txt").read_bytes()
    assert lock.image_lock == hashlib.sha256(image_lock).hexdigest()
    assert (lock.target, lock.python, lock.platform) == ("cpu", "3.11", "x86_64-manylinux_2_36")
    assert lock.asked == ("alpha==1.0", "numpy") and lock.source == "requirements.txt"


def test_the_lock_reads_back_as_written_and_pip_reads_it_as_a_requirements_file(sources, tree, tmp_path):
    wheel(sources, "alpha", "1.0")
    lock = lock_of(tree, tmp_path, "alpha\n")
    text = lock.text("hpcml env lock cpu requirements.txt")
    assert pyenv_lock.parse(text) == lock
    pins = [line for line in text.splitlines() if not line.startswith("#")]
    assert pins == [f"alpha==1.0 --hash=sha256:{lock.pins[0].hashes[0]}  # alpha-1.0-py3-none-any.whl"]


def test_a_requirement_that_would_replace_an_image_pin_is_one_line_naming_its_line_and_version(sources, tree, tmp_path):
    with pytest.raises(RecipeError) as caught:
        lock_of(tree, tmp_path, "alpha\nnumpy<2.3\n")
    assert str(caught.value) == (
        f"{tmp_path}/requirements.txt:2: 'numpy<2.3': the image holds numpy 2.4.6 (target cpu's lock), which an "
        "env never replaces; loosen the requirement, or move the image's pin and rebuild the image"
    )


def test_a_marker_that_does_not_hold_for_the_image_python_is_no_conflict(sources, tree, tmp_path):
    wheel(sources, "alpha", "1.0")
    lock = lock_of(tree, tmp_path, 'alpha\nnumpy<2 ; python_version < "3.10"\n')
    assert [p.name for p in lock.pins] == ["alpha"]


def test_a_package_that_needs_another_version_of_an_image_pin_names_its_line_and_the_pin(sources, tree, tmp_path):
    wheel(sources, "alpha", "1.0")
    wheel(sources, "oldlib", "1.0", ["numpy<2"])
    wheel(sources, "numpy", "1.26.4")
    wheel(sources, "numpy", "2.4.6")
    with pytest.raises(RecipeError) as caught:
        lock_of(tree, tmp_path, "alpha\noldlib==1.0\n")
    message = str(caught.value)
    assert message.startswith(
        f"{tmp_path}/requirements.txt:2: oldlib==1.0: cannot be installed beside the image's numpy 2.4.6: "
    )
    assert "\n" not in message


def test_a_pyproject_gives_its_dependencies_with_the_lines_they_are_on(sources, tree, tmp_path):
    wheel(sources, "alpha", "1.0")
    text = '[project]\nname = "mine"\nversion = "1"\ndependencies = [\n    "alpha",\n    "torch<2",\n]\n'
    with pytest.raises(RecipeError) as caught:
        lock_of(tree, tmp_path, text, "pyproject.toml")
    assert str(caught.value).startswith(f"{tmp_path}/pyproject.toml:6: 'torch<2': the image holds torch 2.13.0+cpu ")
    lock = lock_of(tree, tmp_path, text.replace('    "torch<2",\n', ""), "pyproject.toml")
    assert [p.name for p in lock.pins] == ["alpha"]


@pytest.mark.parametrize(
    "text, line, expected",
    [
        ("alpha\n-r other.txt\n", 2, "'-r other.txt': pip options are not taken"),
        ("alpha @ https://example.invalid/a.tar.gz\n", 1, "'alpha @ https://example.invalid/a.tar.gz': a direct"),
        ("alpha ==\n", 1, "'alpha ==': not a requirement (Expected semicolon"),
        ("al\x1bpha\n", 1, "'al\\x1bpha': not a requirement"),
    ],
)
def test_what_cannot_be_locked_is_one_line_naming_the_line(tree, tmp_path, text, line, expected):
    path = tmp_path / "requirements.txt"
    path.write_text(text)
    with pytest.raises(RecipeError) as caught:
        pyenv.read_requirements(path)
    assert str(caught.value).startswith(f"{path}:{line}: {expected}")
    assert "\n" not in str(caught.value)


def test_the_command_writes_the_lock_beside_the_requirements_and_nothing_on_a_conflict(sources, tmp_path):
    wheel(sources, "alpha", "1.0")
    (tmp_path / "requirements.txt").write_text("alpha\n")
    result = run_here("env", "lock", "cpu", tmp_path / "requirements.txt")
    assert result.returncode == 0, result.stderr
    written = tmp_path / "requirements.cpu.lock"
    assert result.stdout == f"wrote {written}: 1 distributions the image lacks\n"
    assert pyenv_lock.load(written).pins[0].name == "alpha"
    (tmp_path / "bad.txt").write_text("numpy==1.0\n")
    result = run_here("env", "lock", "cpu", tmp_path / "bad.txt", "--out", tmp_path / "bad.lock")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "the image holds numpy 2.4.6" in result.stderr
    assert not (tmp_path / "bad.lock").exists()


def test_a_target_without_a_lock_and_without_its_image_is_refused_in_one_line(tmp_path):
    (tmp_path / "requirements.txt").write_text("alpha\n")
    result = run_here("env", "lock", "lumi-rocm", tmp_path / "requirements.txt", "--images", tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        f"error: {tmp_path}/lumi-rocm.sif: target lumi-rocm has no lock (recipes/locks/lumi-rocm/python.txt), so an "
        "env is locked against its built image, and there is none here; build it, or give --images DIR where it is\n"
    )


def test_a_lock_that_is_not_an_env_lock_is_one_line(tmp_path):
    path = tmp_path / "x.lock"
    path.write_text("alpha==1.0 --hash=sha256:" + "0" * 64 + "\n")
    with pytest.raises(RecipeError, match=r"x.lock: no '# image: TARGET"):
        pyenv_lock.load(path)
    path.write_text("# image: cpu, python 3.11, x86_64-manylinux_2_36, lock sha256 " + "0" * 64 + "\nalpha\n")
    with pytest.raises(RecipeError, match=r"x.lock:2: not a line of an env lock: 'alpha'"):
        pyenv_lock.load(path)
