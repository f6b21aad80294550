"""File -> Export -> Report, and the canvas picture for headless reports: the Qt side of
memdesigner.reports (which stays Qt-free and takes the picture as PNG bytes)."""

from __future__ import annotations

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QImage, QPainter

from memdesigner._qt.dialogs.exports import _scene_rect

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

    from memdesigner._qt.canvas.layout import layered_positions, needs_layout
    from memdesigner._qt.canvas.scene import GraphScene
    from memdesigner._qt.headless_app import ensure_app
    from memdesigner._qt.jobs.estimator import snapshot
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


def write_report_file(design, settings, device, graph_png: bytes | None, path: str) -> list:
    """Collect, rasterise the timeline for Markdown and write: safe on a worker thread (the design
    is a snapshot; QImage and QSvgRenderer need no GUI thread)."""
    from memdesigner.reports import collect, write_report

    content = collect(design, settings, device, graph_png=graph_png)
    if str(path).lower().endswith((".md", ".markdown")):
        content.timeline_png = svg_png_bytes(content.timeline_svg)
    return write_report(content, path)


def export_report_dialog(window, path: str | None = None) -> str | None:
    """File -> Export -> Report: ask for the file, then collect and write it on a worker thread (the
    largest-batch search over every device takes seconds on big designs). With ``path`` given it
    writes synchronously and returns the path, or None after showing why it failed."""
    from pathlib import Path

    from PySide6.QtWidgets import QFileDialog, QMessageBox

    from memdesigner._qt.jobs.estimator import snapshot
    from memdesigner.reports import ReportError, format_for

    background = path is None
    if path is None:
        base = Path(window._last_dir()) / f"{window.design.name or 'design'}-report.html"
        path, flt = QFileDialog.getSaveFileName(window, "Export report", str(base),
                                                "HTML report (*.html);;Markdown report (*.md)")
        if not path:
            return None
        if not Path(path).suffix:
            path += ".md" if flt.startswith("Markdown") else ".html"
    try:
        format_for(path)
    except ValueError as err:
        QMessageBox.warning(window, "Export failed", str(err))
        return None
    args = (snapshot(window.design), window.settings_bar.settings(), window.settings_bar.current_device(),
            canvas_png_bytes(window.scene), path)

    def failed(err):
        from memdesigner.io.atomic_write import cannot_write

        text = cannot_write(path, err) if isinstance(err, OSError) and err.strerror else f"{path}: {err}"
        QMessageBox.warning(window, "Export failed", text)

    def done(_files=None):
        window.statusBar().showMessage(f"Exported {path}", 4000)

    if not background:
        try:
            write_report_file(*args)
        except (ReportError, OSError) as err:
            failed(err)
            return None
        done()
        return path
    from superqt.utils import create_worker

    worker = create_worker(write_report_file, *args)
    worker.returned.connect(done)
    worker.errored.connect(failed)
    worker.finished.connect(lambda: window.busy_label.setText(""))
    window.busy_label.setText("writing the report…")
    worker.start()
    window._report_worker = worker
    return path
