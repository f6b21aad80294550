"""The design file's schema accepts every run setting the engine (and the window's bar) offers:
a design saved with AdamW 8-bit could not be opened again ("settings.optimizer: 'adamw8bit' is
not one of ..."), which the GUI parity grid found."""

import pytest

from memdesigner.engine import settings as engine_settings
from memdesigner.io.design_file import load_design, save_design
from memdesigner.model.design import Design


@pytest.mark.parametrize("optimizer", engine_settings.OPTIMIZERS)
def test_every_optimizer_saves_and_opens_again(tmp_path, optimizer):
    d = Design("opt")
    d.add_node("Input", {"shape": (4,)}, id="x")
    d.add_node("Linear", {"out_features": 2}, id="fc")
    d.add_edge("x", "fc")
    d.settings = {"mode": "train", "optimizer": optimizer}
    save_design(d, tmp_path / "d.json")
    assert load_design(tmp_path / "d.json").settings["optimizer"] == optimizer
