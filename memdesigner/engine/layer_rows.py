"""The report's per-layer rows, and reusing the previous estimate's rows for the layers an edit
did not touch.

The window builds every row after each edit (its layer table, the canvas labels), and so does
``--format json``: 10,000 LayerRow objects cost 12-22 ms, while an edit changes one or a few.
A row is made from its op's parameter row and forward entry (engine/row_table.py), its NodeInfo
and its node's name, type and layout (a snapshot's node: the same object), with the batch and the design's channels_last: the
previous rows are kept on the analysis' graph memo (shared by the analyses of one graph,
model/analysis.py) with those inputs per op, and a row whose inputs are the same objects or
equal values is the previous row object itself (rows are read, never written).
"""

from __future__ import annotations

from itertools import compress, count
from operator import ne

from memdesigner.engine.ops_in_order import node_column, ops_in_order
from memdesigner.engine.report import LayerRow
from memdesigner.model.shown_layout import shown_shape

NOT_MODELLED = ("not modelled: a Generic op without a memory rule (its output is counted and its inputs are "
                "assumed kept; parameters an importer could not read are missing)")

_MEMO = "layer_rows"  # the graph memo's key: (order, per-op input columns, rows, batch, channels_last, count)


def layer_row(design, nid: str, info, r: dict, act: int, kept: int, batch: int) -> LayerRow:
    """One op's row: ``r`` its parameter row, ``act``/``kept`` its activation and kept bytes."""
    node = design.nodes[nid]
    outputs = info.outputs
    if len(outputs) == 1 and not design.channels_last and not node.layout:  # shown as it is (model/shown_layout.py)
        shape = [batch, *outputs[0].shape]
    else:
        # in the source framework's order (Keras: channels last); the first output only: the
        # others (an RNN's h_n) are not laid out as images
        outs = [shown_shape(design, nid, o.shape) if i == 0 else o.shape for i, o in enumerate(outputs)]
        shape = [[batch, *o] for o in outs] if len(outs) > 1 else [batch, *outs[0]]
    t = node.type
    guess = NOT_MODELLED if t == "Generic" and not info.props.get("traced") else ""
    return LayerRow(nid, node.name, t, shape, r["params"], r["param_bytes"], act, kept, info.flops * batch,
                    r["non_trainable"], guess)


def rows_from_entries(design, an, entries, batch: int) -> list:
    """The rows of ``entries`` ((node, parameter row, activation bytes, kept bytes) per op), in order."""
    infos = an.nodes
    return [layer_row(design, nid, infos[nid], r, act, kept, batch) for nid, r, act, kept in entries]


def rows_from_table(design, an, table, batch: int) -> list:
    """The rows of a run's RowTable, the previous estimate's row objects where an op's inputs
    are as they were (compared in C, all ops at once); rebuilt from scratch for another order.
    A snapshot's nodes (model/snapshots.py: copies nobody edits) are compared by identity, a
    live design's by the fields a row reads (they may have been edited in place)."""
    order = table.order
    n = min(len(order), len(table.base), len(table.ops))  # (as many as ran: RowTable.entries)
    infos, nodes, read_only = ops_in_order(design, an, order)
    cols = (table.base, table.ops, infos, node_column(nodes, read_only))
    memo = an.graph_memo.get(_MEMO)
    channels_last = design.channels_last
    if memo is not None and memo[3] == batch and memo[4] == channels_last and memo[5] == n and memo[0] == order:
        rows = list(memo[2])
        # per op, its inputs as a tuple against the kept ones: items the same object compare
        # without being read (tuple comparison tests identity first), others by value
        todo = compress(count(), map(ne, zip(*cols), zip(*memo[1])))
    else:
        rows = [None] * n
        todo = range(n)
    base, ops = table.base, table.ops
    for i in todo:
        o = ops[i]
        act, kept = (o[0], o[1]) if o.__class__ is tuple else (o.new_bytes, o.kept)
        rows[i] = layer_row(design, order[i], infos[i], base[i], act, kept, batch)
    an.graph_memo[_MEMO] = (order, cols, rows, batch, channels_last, n)
    return list(rows)
