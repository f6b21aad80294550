"""One result presenter: the engine's report, fanned out to every view that shows it.

The views (canvas, inspector, summary, timeline, layer table, Explain dialog) render report
fields; none of them computes memory. An estimate is shown in three event-loop turns (the verdict
and the timeline first, then canvas labels and inspector, then the layer table) so no single
UI-thread slice is long enough to be felt on big designs (at 10,000 layers the canvas's first
labelling slice and the table's 10,000 rows in one turn were 30-45 ms of CPU after every Batch
change). An open Explain dialog is refreshed from the new settings on the worker (it used to
keep showing the settings it was opened with).
"""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer, Signal


class ResultPresenter(QObject):
    timeline_shown = Signal(int)  # the generation whose timeline and verdict are shown (turn 1)

    def __init__(self, window):
        super().__init__(window)
        self.w = window
        self._pending = None  # the result whose second turn is due
        # a timer, not QTimer.singleShot(0, ...): that is a posted call, which Qt may run in the
        # same pass over posted events as turn 1, with no input or timer between the two
        self._next_turn = QTimer(self)
        self._next_turn.setSingleShot(True)
        self._next_turn.setInterval(0)
        self._next_turn.timeout.connect(self._turn_two)
        self._last_turn = QTimer(self)  # (turn three: the table)
        self._last_turn.setSingleShot(True)
        self._last_turn.setInterval(0)
        self._last_turn.timeout.connect(self._turn_three)
        self._table_pending = None
        self.explain_dialog = None
        self._explain_task = None
        self.import_warnings: list[str] = []  # the last import's, until another design is shown

    # -- the estimate ---------------------------------------------------------------------------
    def present(self, res) -> None:
        """Turn 1: the verdict and the memory timeline (what an edit is made to see change);
        turn 2, after the event loop had its turn (input, timers, paints): the canvas labels,
        the inspector, the layer table."""
        w = self.w
        w.result = res
        rep = res.report
        w.summary.set_report(rep, res.error, self.import_warnings, _verdict(w.design, rep))
        if rep is not None:
            w.settings_bar.show_sequence(rep.sequence_length)
        if w.sweep is not None and rep is not None and w.sweep.gen == res.gen:  # (an older one: other settings)
            w.summary.set_max_batch(w.sweep)
        if res.error:
            w.statusBar().showMessage(f"Estimate failed: {res.error}", 10000)
        w.busy_label.setText(f"estimated in {res.seconds * 1000:.0f} ms")
        w.rank_picker.show_report(rep, w.measured, getattr(res, "figure", None))  # busiest rank, or the one picked
        w.legend.setText(w.timeline.legend_html())
        ids = w.scene.selected_node_ids()
        w.timeline.highlight_node(ids[0] if len(ids) == 1 else None)
        self.timeline_shown.emit(res.gen)
        if not w.split_paint:
            self.present_views(res)
        else:
            self._pending = res
            self._next_turn.start()

    def _turn_two(self) -> None:
        res, self._pending = self._pending, None
        if res is not None:
            self.present_views(res)

    def present_views(self, res) -> None:
        w = self.w
        if res is not w.result:
            return  # a newer estimate arrived in between
        rep, an = res.report, res.shown_analysis or res.analysis  # (shapes at the Tokens setting)
        shown_an, shown_rep = w.blocks_nav.shown_result(an, rep)  # an opened block: its nodes' share
        w.scene.apply_result(shown_an, shown_rep)
        w.inspector.apply_analysis(shown_an)
        if not w.split_paint:
            self.present_table(res)
        else:
            self._table_pending = res
            self._last_turn.start()

    def _turn_three(self) -> None:
        res, self._table_pending = self._table_pending, None
        if res is not None and res is self.w.result:
            self.present_table(res)

    def present_table(self, res) -> None:
        """The layer table (and the tab's count of layers not modelled: the report's list of
        them), then every view shows ``res``."""
        w = self.w
        rep = res.report
        w.table.set_rows(rep.layers if rep is not None else [])
        guessed = len(rep.unruled_ops) if rep is not None else 0
        i = w.tabs.indexOf(w.table)
        if i >= 0:
            w.tabs.setTabText(i, f"Layers (⚠ {guessed} not modelled)" if guessed else "Layers")
        self.refresh_explain()
        w.result_applied.emit(res.gen)

    def views_busy(self) -> bool:
        """A view is still showing the last result in slices (the canvas re-labels big designs
        over several event-loop turns): the estimate's batch sweep waits for it."""
        jobs = getattr(self.w.scene, "jobs", None)
        return self._table_pending is not None or (jobs is not None and jobs.busy)

    def design_changed(self, import_warnings=None) -> None:
        """A new design is shown: its importer's warnings (or none) go with it."""
        self.import_warnings = [str(x) for x in (import_warnings or [])]

    # -- Explain the Peak -----------------------------------------------------------------------
    def open_explain(self):
        from PySide6.QtCore import Qt

        from memdesigner._qt.memory.explain import ExplainDialog

        if self.explain_dialog is not None:
            self.explain_dialog.raise_()
            self.refresh_explain()
            return self.explain_dialog
        dlg = ExplainDialog(self.w)
        dlg.node_clicked.connect(lambda nid: self.w.select_node(nid, center=True))
        dlg.setAttribute(Qt.WA_DeleteOnClose)
        dlg.destroyed.connect(self._explain_closed)
        self.explain_dialog = dlg
        dlg.show()
        self.refresh_explain()
        return dlg

    def _explain_closed(self, *_):
        self.explain_dialog = None

    def refresh_explain(self) -> None:
        """Re-explain the current design and settings on the worker; an older run still going is
        cancelled (its rows would be stale)."""
        dlg = self.explain_dialog
        if dlg is None:
            return
        from memdesigner._qt.jobs.estimator import snapshot
        from memdesigner._qt.memory.explain import explain_job
        from memdesigner._qt.scheduling import worker

        w = self.w
        if self._explain_task is not None and self._explain_task.running:
            self._explain_task.cancel()
        job = explain_job(snapshot(w.design), w.settings_bar.settings(), w.settings_bar.current_device())
        dlg.show_pending()
        self._explain_task = worker.run(w, job, title="Explain the peak", label="Explaining the peak…",
                                        on_result=self._explained, on_error=self._explain_failed, progress=False)

    def _explained(self, result) -> None:
        if self.explain_dialog is not None:
            self.explain_dialog.show_rows(*result)

    def _explain_failed(self, err) -> None:
        from memdesigner.text import first_line

        if self.explain_dialog is not None:
            self.explain_dialog.show_error(f"Cannot explain: {first_line(err)}")


def _verdict(design, rep):
    """Whether this estimate was checked by PyTorch (engine/verified.py), for the summary's line."""
    if rep is None:
        return None
    from memdesigner.engine.verified import verdict

    return verdict(design, rep.settings, rep.peak_bytes)
