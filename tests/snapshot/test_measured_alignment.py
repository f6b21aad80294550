"""Issue 10 §4: the measured curve sits on the estimate op by op. Each measured entry carries the
layer it was made in (measure/layer_tags.py); it is drawn over that layer's ops of its phase, and
entries made between layers (an inline op, the optimizer's loops) between the layers around them."""

from memdesigner.snapshot.align import align_measured, align_measured_ops

EST = [("forward", "x"), ("forward", "a"), ("forward", "b"), ("backward", None), ("backward", "b"),
       ("backward", "a"), ("optimizer_step", "a"), ("optimizer_step", "b")]
PHASES = ["forward"] * 4 + ["backward"] * 3 + ["optimizer_step"] * 2
LAYERS = [["forward", ["a"]], ["forward", ["a"]], None, ["forward", ["b"]], ["backward", ["b"]],
          ["backward", ["b"]], ["backward", ["a"]], ["backward", ["a"]], None]  # a backward tag lingers into the step


def test_entries_sit_on_their_layers_ops():
    values = list(range(10, 100, 10))
    x, y = align_measured_ops(EST, values, PHASES, LAYERS)
    # a: op 1 (x 1..2), the inline op at b's start, b: op 2 (2..3); backward b: op 4, a: op 5;
    # the optimizer's entries (no layer of that phase) spread over its two ops
    assert list(x) == [1.5, 2.0, 2.0, 3.0, 4.5, 5.0, 6.0, 7.0, 8.0] and list(y) == values
    bx, _ = align_measured([p for p, _ in EST], values, PHASES)  # by phase only: stretched
    assert list(bx[:4]) == [0.75, 1.5, 2.25, 3.0]


def test_without_tags_it_is_phase_by_phase():
    values = list(range(9))
    x, _ = align_measured_ops(EST, values, PHASES, None)
    assert list(x) == list(align_measured([p for p, _ in EST], values, PHASES)[0])
