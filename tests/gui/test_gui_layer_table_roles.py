"""The layer table's model answers the roles a view asks about with the report's fields (roles
matched as plain ints, as Qt passes them), nothing for the roles it has no use for, and announces
exactly the rows a new result changed."""

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor

from memdesigner._qt.memory.layer_table import LayerModel
from memdesigner._qt.theme import WARN_COLOR
from memdesigner.engine.report import LayerRow


def _rows(act=3 * 2**20):
    return [LayerRow("fc", "fc", "Linear", [8, 256], 1_234_567, 4 * 1_234_567, act, 0, 2_000_000),
            LayerRow("g", "g", "Generic", [8, 256], 0, 0, 8192, 0, 0, not_modelled="no memory rule for op foo")]


class _Unreadable(list):
    """As many rows as before, none of which can be read."""

    def __init__(self, n):
        super().__init__([None] * n)

    def __getitem__(self, i):
        raise AssertionError("a row was read")


def _ask(m, r, c, role):
    return m.data(m.index(r, c), int(role.value))


def test_each_role_reads_the_report_fields(qapp):
    m = LayerModel()
    m.set_rows(_rows())
    assert [_ask(m, 0, c, Qt.DisplayRole) for c in range(8)] == [
        "fc", "Linear", "8×256", "1.23 M", "4.7 MiB", "3.0 MiB", "–", "2.00 MFLOP"]
    assert _ask(m, 1, 1, Qt.DisplayRole) == "⚠ Generic (not modelled)"
    assert _ask(m, 0, 5, Qt.UserRole) == 3 * 2**20 and _ask(m, 0, 0, Qt.UserRole) == "fc"
    assert m.data(m.index(1, 0), int(Qt.UserRole.value) + 1) == "g"
    assert _ask(m, 0, 3, Qt.TextAlignmentRole) == int((Qt.AlignRight | Qt.AlignVCenter).value)
    assert _ask(m, 0, 0, Qt.TextAlignmentRole) is None
    assert _ask(m, 0, 4, Qt.ToolTipRole) == "4,938,268"
    assert _ask(m, 0, 2, Qt.ToolTipRole) is None and _ask(m, 0, 0, Qt.ToolTipRole) is None
    assert _ask(m, 1, 0, Qt.ToolTipRole) == "no memory rule for op foo"
    assert _ask(m, 1, 3, Qt.ForegroundRole) == QColor(WARN_COLOR) and _ask(m, 0, 3, Qt.ForegroundRole) is None
    assert not _ask(m, 0, 0, Qt.DecorationRole).isNull() and _ask(m, 0, 1, Qt.DecorationRole) is None


def test_roles_it_has_no_use_for_are_answered_without_reading_a_row(qapp):
    """Qt asks every visible cell about fonts, backgrounds, check states and size hints on each
    paint: those return before the row is looked at."""
    m = LayerModel()
    m.set_rows(_rows())
    m.rows = _Unreadable(len(m.rows))
    for role in (Qt.FontRole, Qt.BackgroundRole, Qt.CheckStateRole, Qt.SizeHintRole, Qt.StatusTipRole):
        assert _ask(m, 0, 3, role) is None


def test_only_the_changed_rows_are_announced(qapp):
    m = LayerModel()
    m.set_rows(_rows())
    seen = []
    m.dataChanged.connect(lambda a, b, roles=(): seen.append((a.row(), b.row())))
    m.modelReset.connect(lambda: seen.append("reset"))
    m.set_rows(_rows())  # new row objects, the same values
    assert seen == []
    m.set_rows(_rows(act=2**20)[:1] + _rows()[1:])
    assert seen == [(0, 0)]
    rows = _rows()
    rows[1].not_modelled = ""
    m.set_rows(rows)  # the warning went: that row's text and colour change
    assert seen == [(0, 0), (0, 1)]
