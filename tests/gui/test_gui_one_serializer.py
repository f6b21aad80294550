"""Issue 10 §6: one serializer. Save, autosave and the clipboard write the design file's own
dicts (io/design_file.py); the worker's snapshot is a fast copy that must stay field for field
what that serializer writes (a node field added to the file but not to the copy would be lost
by every estimate)."""

import json

from gui_helpers import small_cnn

from memdesigner._qt.canvas import graph_ops
from memdesigner._qt.document import recovery
from memdesigner._qt.jobs.estimator import snapshot
from memdesigner.io.design_file import copy_design, design_text, design_to_dict


def _every_field():
    d = small_cnn()
    d.settings = {"mode": "train", "batch": 4}
    n = d.nodes["fc"]
    n.bits, n.scope, n.keep_until, n.fused, n.layout, n.output, n.trainable = 4, "head", "relu", "gelu", "moved", \
        True, False
    n.tied = {"weight": "conv.weight"}
    return d


def test_the_snapshot_copies_what_the_file_keeps():
    d = _every_field()
    assert design_to_dict(snapshot(d)) == design_to_dict(d)
    assert design_to_dict(copy_design(d)) == design_to_dict(d)


def test_save_autosave_and_clipboard_write_the_file_format(tmp_path, qapp):
    d = _every_field()
    slot = recovery.Slot()
    try:
        auto = json.loads(slot.write(d, None).read_text())
    finally:
        slot.release()
    assert auto["design"] == json.loads(design_text(d))
    clip = graph_ops.copy_data(d, ["conv", "fc"])
    saved = {nd["id"]: nd for nd in design_to_dict(d)["nodes"]}
    assert clip["nodes"] == [saved["conv"], saved["fc"]]


def test_the_clipboard_is_read_by_the_design_file_parser(qapp):
    from PySide6.QtWidgets import QApplication

    QApplication.clipboard().setText('memdesigner-nodes:{"nodes": [{"pos": [NaN, 0]}]}')
    assert graph_ops.from_clipboard() is None  # refused, like a design file with NaN
    QApplication.clipboard().setText('memdesigner-nodes:{"nodes": [{"id": "a", "type": "ReLU", "pos": [0, 0], '
                                     '"tied": 5}], "edges": []}')
    assert graph_ops.from_clipboard() is None  # and by its schema (a tie is an object)
    graph_ops.to_clipboard(graph_ops.copy_data(small_cnn(), ["conv"]))
    assert graph_ops.from_clipboard()["nodes"][0]["id"] == "conv"
