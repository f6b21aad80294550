"""Save / open round trip, exports and the headless render (recovery: test_gui_work_never_lost.py)."""

import json

import pytest
from gui_helpers import load, small_cnn

from memdesigner.engine.settings import Settings
from memdesigner.io.design_file import design_to_dict, load_design


def _strip(d):
    d = dict(d)
    d.pop("settings", None)
    return d


def test_save_and_reopen_round_trip(window, qtbot, tmp_path):
    load(window, qtbot, small_cnn())
    window.select_node("conv")
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        window.inspector.commit("out_channels", 24)
    assert window.dirty
    path = tmp_path / "net.json"
    assert window.save_to(str(path))
    assert not window.dirty
    saved = design_to_dict(window.design)
    peak = window.result.report.peak_bytes
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        window.set_design(small_cnn(), None)
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        assert window.open_path(str(path))
    assert _strip(design_to_dict(window.design)) == _strip(saved)
    assert window.result.report.peak_bytes == peak
    assert load_design(path).nodes["conv"].props["out_channels"] == 24


def test_exports(window, qtbot, tmp_path):
    load(window, qtbot, small_cnn())
    assert window.export("canvas_png", str(tmp_path / "c.png"))
    assert window.export("timeline_png", str(tmp_path / "t.png"))
    assert window.export("table_csv", str(tmp_path / "t.csv"))
    rows = (tmp_path / "t.csv").read_text().splitlines()
    assert rows[0].startswith("id,name,type") and len(rows) == 6
    from memdesigner._qt.dialogs.exports import svg_available

    if svg_available():
        assert window.export("canvas_svg", str(tmp_path / "c.svg"))
        assert "<svg" in (tmp_path / "c.svg").read_text()
    for f in ("c.png", "t.png"):
        assert (tmp_path / f).stat().st_size > 1000


def test_render_design_headless(tmp_path, qapp):
    from memdesigner._qt.render import render_design

    out = tmp_path / "r.png"
    render_design(small_cnn(), out, Settings(mode="train", batch=8), device_id="big")
    from PySide6.QtGui import QImage

    img = QImage(str(out))
    assert img.width() >= 1200 and img.height() >= 800


def test_missing_importer_is_reported_not_raised(monkeypatch):
    import builtins

    from memdesigner._qt import hooks

    real = builtins.__import__

    def fake(name, *a, **k):
        if name.startswith("memdesigner.measure.torch_measure") or name == "torch":
            raise ImportError("No module named 'torch'")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake)
    monkeypatch.setattr("memdesigner.measure.isolated.torch_available", lambda: False)  # measured in a child
    try:
        hooks.measure(small_cnn(), Settings())
    except hooks.MissingFeature as err:
        assert "torch" in str(err)
    else:
        raise AssertionError("expected MissingFeature")


def test_measured_overlay(window, qtbot):
    load(window, qtbot, small_cnn())
    peak = window.result.report.peak_bytes
    window.show_measured({"peak_bytes": peak + 1000, "timeline": [0, peak // 2, peak + 1000, peak // 3]})
    assert "measured" in window.legend.text()
    json.dumps(window.measured)


def test_render_estimates_every_setting_it_is_given(tmp_path, qapp, monkeypatch):
    """`memdesigner render --lora 16 --gpus 2 --strategy zero3` pictures that estimate, not the full
    fine-tune on one GPU (the render handed the window only mode, batch, optimizer, dtype, AMP and
    checkpointing)."""
    from memdesigner._qt import main_window
    from memdesigner._qt.render import render_design

    seen = []
    real = main_window.MainWindow.estimate_now

    def spy(self, *a, **k):
        seen.append(self.settings_bar.settings())
        return real(self, *a, **k)

    monkeypatch.setattr(main_window.MainWindow, "estimate_now", spy)
    want = Settings(mode="train", batch=2, optimizer="adamw", lora_r=16, lora_alpha=32.0, lora_targets=("fc",), gpus=2,
                    strategy="zero3")
    render_design(small_cnn(), tmp_path / "r.png", want, device_id="big")
    assert seen and seen[-1] == want


def test_file_export_pytorch_code_runs(window, qtbot, tmp_path, monkeypatch):
    """File -> Export -> PyTorch Code writes what `memdesigner export torch` writes, and it runs."""
    torch = pytest.importorskip("torch")
    from PySide6.QtWidgets import QFileDialog

    from memdesigner.exporters.torch_code import to_python

    load(window, qtbot, small_cnn())
    out = tmp_path / "model.py"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: (str(out), "")))
    menus = [a.menu() for a in window.menuBar().actions() if a.menu() is not None]
    subs = [a.menu() for m in menus for a in m.actions() if a.menu() is not None]
    assert any(window.act_export_torch in m.actions() for m in subs)  # under File -> Export
    window.act_export_torch.trigger()
    assert out.read_text() == to_python(window.design)
    scope: dict = {}
    exec(compile(out.read_text(), str(out), "exec"), scope)  # noqa: S102 - our own export
    model = next(v for v in scope.values() if isinstance(v, type) and issubclass(v, torch.nn.Module)
                 and v is not torch.nn.Module)()
    assert model(torch.zeros(2, 3, 32, 32)).shape == (2, 10)
