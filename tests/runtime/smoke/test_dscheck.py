"""smoke.dscheck: ds_report's rows, the ops DeepSpeed lists held to exactly the image's promise,
and the guard that fails an op compiled at run time."""

import os
import sys
from pathlib import Path

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "runtime"))
from smoke import dscheck  # noqa: E402

DS_REPORT = """\x1b[92m[OKAY]\x1b[0m
op name ................ installed .. compatible
--------------------------------------------------
cpu_adam ............... \x1b[92m[YES]\x1b[0m ...... \x1b[92m[OKAY]\x1b[0m
cpu_adagrad ............ [YES] ...... [OKAY]
fused_adam ............. [NO] ....... [NO]
deepspeed_not_implemented  [NO] ....... [OKAY]
"""


def test_ds_report_rows_are_read_through_colour_codes():
    assert dscheck.parse_report(DS_REPORT) == {
        "cpu_adam": (True, True),
        "cpu_adagrad": (True, True),
        "fused_adam": (False, False),
        "deepspeed_not_implemented": (False, True),
    }


LISTED = ["cpu_adagrad", "cpu_adam", "deepspeed_not_implemented", "fused_adam"]


def _fake_ds_report(tmp_path, monkeypatch):
    """A stand-in deepspeed package whose env_report prints DS_REPORT, found by this
    interpreter and its children (DeepSpeed is not on the host)."""
    package = tmp_path / "deepspeed"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "env_report.py").write_text(f"print({DS_REPORT!r}, end='')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))


def test_ds_report_needs_deepspeed_in_this_python(monkeypatch):
    monkeypatch.setattr(dscheck.importlib.util, "find_spec", lambda name: None)
    result = dscheck.check_ops(["cpu_adam"], LISTED, timeout=30)
    assert result.verdict == "fail" and "DeepSpeed is not installed for " in result.why


@pytest.mark.parametrize(
    "promised, listed, verdict, why",
    [
        (["cpu_adagrad", "cpu_adam"], LISTED, "pass", "exactly the 2 promised ops installed"),
        (["cpu_adagrad", "cpu_adam", "fused_adam"], LISTED, "fail", "promised but not installed: fused_adam"),
        (["cpu_adam"], LISTED, "fail", "installed but not in the image's labels: cpu_adagrad"),
        (["cpu_adagrad", "cpu_adam"], LISTED[:-1], "fail", "DeepSpeed lists ops the recipe does not know: fused_adam"),
        (
            ["cpu_adagrad", "cpu_adam"],
            LISTED + ["pin_memory"],
            "fail",
            "the recipe knows ops DeepSpeed does not list: pin_memory",
        ),
    ],
)
def test_ds_report_must_show_exactly_the_promise(tmp_path, monkeypatch, promised, listed, verdict, why):
    _fake_ds_report(tmp_path, monkeypatch)
    result = dscheck.check_ops(promised, listed, timeout=30)
    assert result.verdict == verdict and why in result.why, result


def test_an_op_compiled_by_any_path_fails_the_no_jit_guard(monkeypatch):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", "/users/own/setting")
    with pytest.raises(dscheck.JITBuild, match="compiled at run time into .*: cpu_adam"):
        with dscheck.no_jit():
            folder = Path(os.environ["TORCH_EXTENSIONS_DIR"])
            (folder / "cpu_adam").mkdir()
    assert os.environ["TORCH_EXTENSIONS_DIR"] == "/users/own/setting"  # restored
    assert not folder.exists()  # and cleaned up
