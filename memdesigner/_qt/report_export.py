"""File -> Export -> Report, and the canvas picture for headless reports: the Qt side of
memdesigner.reports (which stays Qt-free and takes the picture as PNG bytes)."""

from __future__ import annotations

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QImage, QPainter

from memdesigner._qt.exports import _scene_rect

MAX_SIDE = 2000  # px: sharp on a laptop screen, small enough to embed (base64) in a report


def canvas_png_bytes(scene, max_side: int = MAX_SIDE) -> bytes:
    """The whole canvas as PNG bytes, at 2x up to ``max_side`` pixels on the longer side."""
    rect = _scene_rect(scene)
    scale = min(2.0, max_side / max(rect.width(), rect.height(), 1.0))
    size = QSize(max(1, int(rect.width() * scale)), max(1, int(rect.height() * scale)))
    img = QImage(size, QImage.Format_ARGB32_Premultiplied)
    img.fill(scene.backgroundBrush().color() if scene.backgroundBrush().style() else QColor("white"))
    p = QPainter(img)
    p.setRenderHints(QPainter.Antialiasing | QPainter.TextAntialiasing | QPainter.SmoothPixmapTransform)
    scene.render(p, QRectF(0, 0, size.width(), size.height()), rect, Qt.KeepAspectRatio)
    p.end()
    return _png(img)


def svg_png_bytes(svg: str, scale: float = 2.0) -> bytes | None:
    """An SVG document rasterised to PNG bytes (None where this PySide6 has no QtSvg)."""
    try:
        from PySide6.QtSvg import QSvgRenderer
    except ImportError:
        return None
    r = QSvgRenderer(QByteArray(svg.encode("utf-8")))
    if not r.isValid():
        return None
    size = r.defaultSize()
    img = QImage(QSize(int(size.width() * scale), int(size.height() * scale)), QImage.Format_ARGB32_Premultiplied)
    img.fill(QColor("white"))
    p = QPainter(img)
    p.setRenderHints(QPainter.Antialiasing | QPainter.TextAntialiasing)
    r.render(p)
    p.end()
    return _png(img)


def _png(img: QImage) -> bytes:
    data = QByteArray()
    buf = QBuffer(data)
    buf.open(QIODevice.WriteOnly)
    img.save(buf, "PNG")
    buf.close()
    return bytes(data.data())


def design_canvas_png(design, settings, device=None) -> bytes:
    """Headless: lay the design out as the window would, paint the estimate's shapes on the nodes
    and return the canvas as PNG bytes (for `memdesigner report`)."""
    from PySide6.QtGui import QUndoStack

    from memdesigner._qt.estimator import snapshot
    from memdesigner._qt.layout import layered_positions, needs_layout
    from memdesigner._qt.render import ensure_app
    from memdesigner._qt.scene import GraphScene
    from memdesigner.engine.estimate import estimate
    from memdesigner.model.analysis import analyze

    app = ensure_app()
    d = snapshot(design)
    if needs_layout(d):
        for nid, pos in layered_positions(d).items():
            d.nodes[nid].pos = pos
    an = analyze(d)
    rep = estimate(d, settings, device=device, analysis=an)
    stack = QUndoStack()
    scene = GraphScene(stack)
    try:
        scene.set_design(d)
        scene.apply_result(an, rep)
        app.processEvents()
        return canvas_png_bytes(scene)
    finally:
        d.unsubscribe(scene._on_design)
        scene.clear()
        scene.deleteLater()
        app.processEvents()


def export_report(window, path: str, images: str = "inline") -> list:
    """Write the report of the window's design under its current settings and device."""
    from memdesigner._qt.estimator import snapshot
    from memdesigner.reports import collect, write_report

    content = collect(snapshot(window.design), window.settings_bar.settings(), window.settings_bar.current_device(),
                      graph_png=canvas_png_bytes(window.scene))
    content.timeline_png = svg_png_bytes(content.timeline_svg)
    return write_report(content, path, images=images)


def export_report_dialog(window, path: str | None = None) -> str | None:
    """File -> Export -> Report: ask for the file (unless given), write it, say where it went."""
    from pathlib import Path

    from PySide6.QtWidgets import QApplication, QFileDialog, QMessageBox

    from memdesigner.reports import ReportError

    if path is None:
        base = Path(window._last_dir()) / f"{window.design.name or 'design'}-report.html"
        path, flt = QFileDialog.getSaveFileName(window, "Export report", str(base),
                                                "HTML report (*.html);;Markdown report (*.md)")
        if not path:
            return None
        if not Path(path).suffix:
            path += ".md" if flt.startswith("Markdown") else ".html"
    QApplication.setOverrideCursor(Qt.WaitCursor)
    try:
        export_report(window, path)
    except (ReportError, ValueError, OSError) as err:
        QApplication.restoreOverrideCursor()
        QMessageBox.warning(window, "Export failed", f"{path}: {err}")
        return None
    QApplication.restoreOverrideCursor()
    window.statusBar().showMessage(f"Exported {path}", 4000)
    return path
