"""The optimizer step's timeline entry names the optimizer that was chosen: AdamW was shown as
"adam (foreach)"."""

from helpers import mlp

from memdesigner import estimate


def test_foreach_step_named_after_the_optimizer():
    for opt in ("adam", "adamw"):
        rep = estimate(mlp(), mode="train", optimizer=opt, backend="cuda")
        labels = [e.label for e in rep.timeline if e.phase == "optimizer_step"]
        assert labels == [f"{opt} (foreach)"], labels
