"""File -> Export -> Report writes the window's design, settings and device, with the canvas
picture; the window's CSV export and the report carry the same per-layer rows."""

import base64
import csv
import re

from gui_helpers import load, small_cnn

from memdesigner.engine.estimate import estimate
from memdesigner.engine.report import write_layers_csv
from memdesigner.engine.settings import Settings


def test_export_report_from_the_window(window, qtbot, tmp_path):
    load(window, qtbot, small_cnn())
    window.settings_bar.set_device("small")
    with qtbot.waitSignal(window.result_applied, timeout=5000):
        window.settings_bar.apply_dict({"mode": "train", "batch": 8, "optimizer": "adam"})
    assert window.settings_bar.current_device().id == "small"
    rep = estimate(window.design, Settings(mode="train", batch=8, optimizer="adam"), device=window.settings_bar.current_device())
    assert window.result.report.peak_bytes == rep.peak_bytes  # the window shows what the report says
    path = tmp_path / "r.html"
    assert window.export_report(str(path)) == str(path)
    h = path.read_text()
    assert "small-cnn" in h and "Small GPU 1 GiB" in h and "FITS" in h
    assert f"{rep.peak_bytes:,} B" in h and "batch 8" in h
    png = base64.b64decode(re.search(r'src="data:image/png;base64,([^"]+)"', h).group(1))
    assert png.startswith(b"\x89PNG") and len(png) > 5000  # the canvas as the window draws it
    # the table's CSV (execution order) is the engine's CSV of the same rows
    window.export("table_csv", str(tmp_path / "t.csv"))
    write_layers_csv(rep.layers, tmp_path / "e.csv")
    assert (tmp_path / "t.csv").read_text() == (tmp_path / "e.csv").read_text()
    rows = list(csv.reader(open(tmp_path / "t.csv", encoding="utf-8")))[1:]
    for r in rows:
        assert f'data-id="{r[0]}"' in h and f'title="{r[4]}"' in h
    md = tmp_path / "r.md"
    assert window.export_report(str(md))
    text = md.read_text()
    assert "# Memory report: small-cnn" in text
    # inline pictures as PNG data URIs (Markdown renderers refuse SVG ones): the graph and the timeline
    pngs = re.findall(r"\]\(data:image/png;base64,([^)]+)\)", text)
    assert len(pngs) == 2 and all(base64.b64decode(p).startswith(b"\x89PNG") for p in pngs)
    assert "image/svg+xml" not in text


def test_export_report_menu_writes_in_the_background(window, qtbot, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QFileDialog

    load(window, qtbot, small_cnn())
    target = tmp_path / "picked"  # no suffix: the chosen filter adds .md
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(target), "Markdown report (*.md)"))
    window.act_export_report.trigger()
    out = tmp_path / "picked.md"
    qtbot.waitUntil(lambda: out.exists() and "Exported" in window.statusBar().currentMessage(), timeout=10000)
    assert "# Memory report: small-cnn" in out.read_text()
