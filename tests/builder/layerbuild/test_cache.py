"""The user's store of kept step outputs, and what a layer build hands the definition."""

import os
import sys

import pytest

from builder.host import cache
from builder.host.progress import Progress
from builder.layerbuild import host_settings, store


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def made(tmp_path, name, complete=True, content="wheel"):
    folder = tmp_path / "made" / name
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "lib.so").write_text(content)
    os.chmod(folder / "sub" / "lib.so", 0o755)
    (folder / "link.so").symlink_to("sub/lib.so")
    if complete:
        (folder / cache.COMPLETE).write_text("")
    return folder


def test_a_complete_output_comes_back_whole(tmp_path):
    cache.store_kept("plugin-aaaa", made(tmp_path, "plugin-aaaa"))
    dest = tmp_path / "host" / "plugin-aaaa"
    assert cache.fetch_kept("plugin-aaaa", dest)
    assert (dest / "sub" / "lib.so").read_text() == "wheel"
    assert os.stat(dest / "sub" / "lib.so").st_mode & 0o777 == 0o755
    assert os.readlink(dest / "link.so") == "sub/lib.so"
    assert not cache.fetch_kept("plugin-bbbb", tmp_path / "host" / "plugin-bbbb")


def test_an_incomplete_output_is_never_stored(tmp_path):
    cache.store_kept("plugin-aaaa", made(tmp_path, "plugin-aaaa", complete=False))
    assert not cache.fetch_kept("plugin-aaaa", tmp_path / "host" / "x")
    assert not list((cache.cache_dir() / "kept").glob(".*tmp-*"))


def test_only_the_newest_outputs_of_a_step_stay(tmp_path):
    for n, digest in enumerate(("aaaa", "bbbb", "cccc")):
        cache.store_kept(f"plugin-{digest}", made(tmp_path, f"plugin-{digest}"))
        stored = cache.cache_dir() / "kept" / f"plugin-{digest}"
        os.utime(stored, (1000 + n, 1000 + n))
    cache.store_kept("deepspeed-wheel-dddd", made(tmp_path, "deepspeed-wheel-dddd"))
    kept = sorted(p.name for p in (cache.cache_dir() / "kept").iterdir() if not p.name.startswith("."))
    assert kept == ["deepspeed-wheel-dddd", "plugin-bbbb", "plugin-cccc"]


def test_building_one_target_never_evicts_another_targets_output(tmp_path):
    # h100-cuda's op wheel, then csc-cuda's and cpu's (two each): h100-cuda's is still there
    cache.store_kept("deepspeed-wheel-h100", made(tmp_path, "deepspeed-wheel-h100"), owner="h100-cuda")
    for n, (digest, owner) in enumerate(
        (("c1", "csc-cuda"), ("p1", "cpu"), ("c2", "csc-cuda"), ("p2", "cpu"), ("c3", "csc-cuda"))
    ):
        cache.store_kept(f"deepspeed-wheel-{digest}", made(tmp_path, f"deepspeed-wheel-{digest}"), owner=owner)
        os.utime(cache.cache_dir() / "kept" / f"deepspeed-wheel-{digest}", (2000 + n, 2000 + n))
    kept = sorted(p.name for p in (cache.cache_dir() / "kept").iterdir() if not p.name.startswith("."))
    assert kept == [
        "deepspeed-wheel-c2",
        "deepspeed-wheel-c3",
        "deepspeed-wheel-h100",
        "deepspeed-wheel-p1",
        "deepspeed-wheel-p2",
    ]
    owners = sorted(p.name for p in (cache.cache_dir() / "kept" / ".owners").iterdir())
    assert owners == ["deepspeed-wheel-" + d for d in ("c2", "c3", "h100", "p1", "p2")]  # c1's went with it
    dest = tmp_path / "host" / "deepspeed-wheel-h100"
    assert cache.fetch_kept("deepspeed-wheel-h100", dest) and (dest / cache.COMPLETE).is_file()


KEPT = ("plugin-aaaa", "deepspeed-wheel-bbbb")  # as a layer plan names them


def test_a_layer_build_gets_a_folder_per_kept_step_filled_when_stored(tmp_path):
    cache.store_kept("plugin-aaaa", made(tmp_path, "plugin-aaaa"))
    host = tmp_path / "host"
    to_fill = store.provide_kept(host, KEPT, reuse=True)
    assert to_fill == ["deepspeed-wheel-bbbb"]
    assert (host / "kept" / "plugin-aaaa" / cache.COMPLETE).is_file()
    assert sorted(p.name for p in (host / "kept").iterdir()) == ["deepspeed-wheel-bbbb", "plugin-aaaa"]


def test_on_a_sites_image_a_new_file_at_the_same_path_gets_no_old_wheel(tmp_path):
    """The definition names the site's image by its path: the kept wheel, compiled against that
    image's torch, is put back only while the file is the one it was made on."""
    image = tmp_path / "site.sif"
    image.write_bytes(b"torch 2.9")
    old = store.site_image_facts(image)  # as the layer build reads them, once
    first = tmp_path / "first"
    assert store.provide_kept(first, ("deepspeed-wheel-bbbb",), True, old) == ["deepspeed-wheel-bbbb"]
    (first / "kept" / "deepspeed-wheel-bbbb" / cache.COMPLETE).write_text("")
    store.store_kept(first, ["deepspeed-wheel-bbbb"], "lumi-laif", old)
    assert store.provide_kept(tmp_path / "again", ("deepspeed-wheel-bbbb",), True, old) == []
    image.write_bytes(b"torch 2.10")  # the site put a new image at the same path
    new = store.site_image_facts(image)
    assert store.provide_kept(tmp_path / "new", ("deepspeed-wheel-bbbb",), True, new) == ["deepspeed-wheel-bbbb"]
    # stored under a name of the same step, so older ones are pruned as any target's
    assert store.kept_name("deepspeed-wheel-bbbb", new).startswith("deepspeed-wheel-")
    assert store.kept_name("deepspeed-wheel-bbbb") == "deepspeed-wheel-bbbb"


def test_force_all_leaves_every_kept_folder_empty(tmp_path):
    cache.store_kept("plugin-aaaa", made(tmp_path, "plugin-aaaa"))
    host = tmp_path / "host"
    assert store.provide_kept(host, KEPT, reuse=False) == ["plugin-aaaa", "deepspeed-wheel-bbbb"]
    assert not list((host / "kept" / "plugin-aaaa").iterdir())


def test_a_silent_index_is_left_out_of_the_settings_and_named_once(tmp_path, monkeypatch, capsys):
    from builder.host import hostinfo
    from builder.host import pip_indexes as indexes

    monkeypatch.setattr(
        hostinfo,
        "pip_settings",
        lambda: {
            "cert": None,
            "index_url": "",
            "find_links": [],
            "extra_index_urls": ["http://answers.invalid/simple", "http://silent.invalid/simple"],
        },
    )
    monkeypatch.setattr(indexes, "why_down", lambda url, cafile=None: "no route" if "silent" in url else None)
    named = ("http://torch.silent.invalid/whl",)  # the layer's own pip lines (its plan)
    progress = Progress(stream=sys.stderr)  # one per command, as `hpcml build` makes
    for n in range(2):
        host_settings.write(tmp_path / f"host{n}", named, progress)
    settings = (tmp_path / "host0" / "hpcml-build-host.sh").read_text().splitlines()
    assert "export PIP_EXTRA_INDEX_URL='http://answers.invalid/simple'" in settings
    assert ("export HPCML_PIP_INDEXES_DOWN='http://silent.invalid/simple http://torch.silent.invalid/whl'") in settings
    progress = capsys.readouterr()
    reports = (progress.out + progress.err).count("does not answer (no route); this build leaves it out")
    assert reports == 2  # each silent index once, not once per layer
