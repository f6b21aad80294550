"""Which rank's memory timeline the window shows: the busiest by default (its peak is the report's
and the fit verdict's); the others where ranks differ (pipeline stages, ZeRO shards)."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QWidget

from memdesigner.units import format_bytes


class RankPicker(QWidget):
    """A small combo box above the timeline; hidden for a single process (or identical ranks)."""

    def __init__(self, timeline, parent=None):
        super().__init__(parent)
        self.timeline = timeline
        self.report = None
        self.measured = None
        self.figure = None  # the worker's drawing of the report's own (busiest rank's) timeline
        lay = QHBoxLayout(self)
        lay.setContentsMargins(8, 2, 8, 0)
        lay.addWidget(QLabel("Rank"))
        self.combo = QComboBox()
        self.combo.setToolTip("The timeline of one rank; the busiest one decides the peak and the fit verdict")
        lay.addWidget(self.combo)
        lay.addStretch(1)
        self.combo.currentIndexChanged.connect(self._show)
        self.hide()

    def busiest(self, report) -> int | None:
        ranks = report.per_rank if report is not None else []
        if not ranks:
            return None
        return max(ranks, key=lambda r: (r["peak_bytes"], -r["rank"]))["rank"]

    def show_report(self, report, measured=None, figure=None) -> None:
        """Fill the picker from a report and show its busiest rank's timeline (or the one picked
        before, if the new report still has it). ``figure``: that timeline drawn on the worker."""
        keep = self.combo.currentData() if self.isVisible() else None
        self.report, self.measured, self.figure = report, measured, figure
        timelines = report.rank_timelines if report is not None else {}
        self.combo.blockSignals(True)
        self.combo.clear()
        if len(timelines) > 1:
            top = self.busiest(report)
            for r in report.per_rank:
                label = f"{r['rank']}" + (f" (stage {r['stage']})" if "stage" in r else "")
                label += f" — {format_bytes(r['peak_bytes'])}" + ("  busiest" if r["rank"] == top else "")
                self.combo.addItem(label, r["rank"])
            i = self.combo.findData(keep if keep in timelines else top)
            self.combo.setCurrentIndex(max(i, 0))
        self.combo.blockSignals(False)
        self.setVisible(len(timelines) > 1)
        self._show()

    def shown_report(self):
        """The report as the timeline draws it: the picked rank's events."""
        rep = self.report
        rank = self.combo.currentData() if self.isVisible() else None
        if rep is None or rank is None or rank not in rep.rank_timelines or rank == self.busiest(rep):
            return rep
        return replace(rep, timeline=rep.rank_timelines[rank])

    def _show(self, *_):
        self.timeline.set_report(self.shown_report(), self.measured, self.figure)
