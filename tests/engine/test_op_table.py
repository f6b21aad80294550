"""The passes walk compiled_rule.op_table's lists beside the order instead of the Structure's
dicts, and the backward fast path gives the outgoing gradient GradBlock.n_alias references in
one step: both must say what the dicts and the rule's input gradients say."""

from pathlib import Path

import memdesigner as md
from memdesigner.engine import compiled_rule
from memdesigner.engine.compiled_rule import G_ALIAS, op_table
from memdesigner.engine.settings import Settings
from memdesigner.engine.sim_structure import structure_of
from memdesigner.engine.simulate import Simulation
from memdesigner.model.analysis import analyze

EX = Path(__file__).resolve().parents[2] / "resources" / "examples"


def test_op_table_is_the_structure_per_op_in_order():
    d = md.load_design(EX / "resnet18.json")
    st = structure_of(d, analyze(d))
    ins_l, base_l, nout_l = op_table(st)
    assert ins_l == [st.ins[n] for n in st.order]
    assert base_l == [st.base[n] for n in st.order]
    assert nout_l == [st.n_out[n] for n in st.order]
    assert op_table(st)[0] is ins_l  # kept on the structure


def test_grad_block_counts_the_inputs_that_share_the_outgoing_gradient():
    d = md.load_design(EX / "resnet18.json")
    compiled_rule.RULES.clear()
    Simulation(d, analyze(d), Settings(mode="train", batch=2, optimizer="adam")).run()
    blocks = [(c, gb) for c in compiled_rule.RULES.values() for gb in c.grad_blocks.values()]
    assert blocks
    for c, gb in blocks:
        assert gb.n_alias == sum(1 for g in c.grads_in if g[1] == G_ALIAS)
    assert any(gb.n_alias for _, gb in blocks)  # resnet18 has ops whose input gradient is the outgoing one
