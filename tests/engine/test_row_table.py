"""A run keeps its per-layer rows compact (engine/row_table.py: each op's shared parameter row and
its compiled rule); ``Simulation.rows`` and the report's layer rows are both made from it and must
say what the layers hold, by hand: x (64 features) -> fc1 Linear 256 -> ReLU -> fc2 Linear 8, batch 32."""

from helpers import mlp

import memdesigner as md
from memdesigner.engine.settings import Settings
from memdesigner.engine.simulate import Simulation
from memdesigner.model.analysis import analyze

B = 32
HAND = {  # node: (params, param bytes, new activation bytes); none keeps an extra tensor
    "x": (0, 0, B * 64 * 4),
    "fc1": (64 * 256 + 256, (64 * 256 + 256) * 4, B * 256 * 4),  # 16,640 params, 66,560 B; 32,768 B out
    "act": (0, 0, B * 256 * 4),
    "fc2": (256 * 8 + 8, (256 * 8 + 8) * 4, B * 8 * 4),  # 2,056 params, 8,224 B; 1,024 B out
}


def test_rows_and_layer_rows_hold_each_layers_bytes():
    d = mlp()
    for kw in (dict(mode="train", batch=B, optimizer="adam"), dict(mode="inference", batch=B)):
        sim = Simulation(d, analyze(d), Settings(**kw)).run()
        got = {n: (r["params"], r["param_bytes"], r["activation_bytes"]) for n, r in sim.rows.items()}
        assert got == HAND
        assert all(r["kept_bytes"] == 0 and r["buffer_bytes"] == 0 for r in sim.rows.values())
        rep = md.estimate(d, **kw)
        assert {r.id: (r.params, r.param_bytes, r.activation_bytes) for r in rep.layers} == HAND
        assert [r.id for r in rep.layers] == ["x", "fc1", "act", "fc2"]


def test_a_second_run_over_the_kept_placement_gives_the_same_rows():
    """The second run takes its parameter rows from the placement kept on the graph's structure."""
    d = mlp()
    an = analyze(d)
    s = Settings(mode="train", batch=B, optimizer="adam")
    first = Simulation(d, an, s).run()
    second = Simulation(d, an, s).run()
    assert second.table.base is first.table.base  # (kept, not placed again)
    assert second.rows == first.rows
    assert {n: r["params"] for n, r in second.rows.items()} == {n: h[0] for n, h in HAND.items()}
