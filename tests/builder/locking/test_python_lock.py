"""locking/python.py: a step resolved by the real uv from a wheel folder of the test's own
(pip's find-links) and an index on loopback that serves nothing, step after step, with the
steps before held; and the command's refusals."""

import hashlib

import pytest
import yaml
from helpers.cli_here import run_here
from helpers.pip_sources import serve, wheel

from builder.locking import python
from builder.render.pip_install import Request


@pytest.fixture
def sources(tmp_path, monkeypatch):
    yield from serve(tmp_path, monkeypatch)


def resolve(asked, before=()):
    steps = list(before)
    for request in asked[len(before) :]:
        steps.append(python._resolve_step(request, steps, asked, "3.11", "x86_64-manylinux_2_36", []))
    return steps


def test_each_step_holds_only_what_the_steps_before_it_lack_with_each_files_sha256(sources):
    files = {
        "alpha": wheel(sources, "alpha", "1.0", ["beta>=1"]),
        "beta": wheel(sources, "beta", "1.2"),
        "gamma": wheel(sources, "gamma", "2.0", ["beta", "delta"]),
        "delta": wheel(sources, "delta", "0.5"),
    }
    wheel(sources, "beta", "0.9")
    asked = (Request("first", ("alpha==1.0",)), Request("second", ("gamma==2.0",)))
    first, second = resolve(asked)
    assert [(p.name, p.version) for p in first.pins] == [("alpha", "1.0"), ("beta", "1.2")]
    assert [(p.name, p.version) for p in second.pins] == [("delta", "0.5"), ("gamma", "2.0")]
    for pin in (*first.pins, *second.pins):
        assert pin.hashes == (hashlib.sha256(files[pin.name].read_bytes()).hexdigest(),)
        assert pin.files == (files[pin.name].name,)  # the file's name, never this machine's path
    assert second.asked == "gamma==2.0"


def test_a_later_step_never_moves_a_pin_of_the_steps_before_it(sources):
    wheel(sources, "alpha", "1.0", ["beta"])
    wheel(sources, "beta", "1.0")
    wheel(sources, "beta", "2.0")
    wheel(sources, "gamma", "1.0", ["beta>=2"])
    asked = (Request("first", ("alpha==1.0", "beta==1.0")), Request("second", ("gamma==1.0",)))
    with pytest.raises(Exception) as caught:
        resolve(asked)
    message = str(caught.value)
    assert message.startswith("uv could not lock step second (gamma==1.0): ") and "\n" not in message


def test_lock_names_what_it_cannot_lock_in_one_line():
    result = run_here("lock", "lumi-laif")
    assert result.returncode == 2 and "starts from a site's image" in result.stderr
    assert result.stderr.count("\n") == 1
    result = run_here("lock")
    assert result.returncode == 2
    assert result.stderr.strip().endswith("name one or more targets, or give --all (not both)")


def test_an_up_to_date_lock_is_left_as_it_is_without_asking_any_source(monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("an up-to-date lock asked a source")

    monkeypatch.setattr(python, "_resolve_step", no_network)
    monkeypatch.setattr(python.pip_indexes, "indexes_down", no_network)
    result = run_here("lock", "cpu", "h100-cuda")
    assert result.returncode == 0, result.stderr
    assert "unchanged recipes/locks/cpu/python.txt" in result.stdout
    assert "unchanged recipes/locks/h100-cuda/python.txt" in result.stdout


def test_list_and_show_say_which_targets_are_unlocked_and_why():
    listed = run_here("list")
    assert listed.returncode == 0, listed.stderr
    unlocked = [line.strip() for line in listed.stdout.splitlines() if "unlocked: " in line]
    assert len(unlocked) == 4  # lumi-rocm, lumi-rocm64 and the two on LUMI's own images
    assert any(
        line.startswith(
            "unlocked: no recipes/locks/lumi-rocm/python.txt: its torch index "
            "(https://download.pytorch.org/whl/rocm7.0) did not answer where the locks were made"
        )
        for line in unlocked
    )
    shown = yaml.safe_load(run_here("show", "lumi-rocm64").stdout)
    assert "lock lumi-rocm64` and commit it" in shown["unlocked"]
    assert "unlocked" not in yaml.safe_load(run_here("show", "cpu").stdout)
    assert "site's image" in yaml.safe_load(run_here("show", "lumi-laif").stdout)["unlocked"]
