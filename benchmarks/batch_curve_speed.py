"""The largest batch and the window's batch sweep against one estimate, in one run, interleaved:
the one-probe curve (one logged run at batch M, the estimate's own run as the check, exact peaks
replayed) beside the three-probe curve it replaced (runs at batch 1, 2, 7 plus exact settles).

    python3 benchmarks/batch_curve_speed.py [--layers 1000] [--repeat 7]

Per case: the largest batch (both ways, must agree), the median CPU ms of one estimate (what the
window runs per edit), and the median ms of the largest batch (``estimate --max-batch``'s extra:
with the estimate's report; "alone": without it) and of the window's whole sweep, each with its
ratio to the estimate. CPU time of this process (the machine may be shared).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from engine_speed import make_design  # noqa: E402

import memdesigner as md  # noqa: E402
from memdesigner.engine import batch_curve  # noqa: E402
from memdesigner.engine.batch_sweep import batch_sweep, largest_batch_of  # noqa: E402
from memdesigner.engine.devices import get_device  # noqa: E402
from memdesigner.engine.settings import Settings  # noqa: E402
from memdesigner.model.analysis import analyze  # noqa: E402

EX = Path(__file__).parent.parent / "resources" / "examples"
_ONE_PROBE = batch_curve._one_probe


def _three_probes(fn):
    def run():
        batch_curve._one_probe = lambda *a: None
        try:
            return fn()
        finally:
            batch_curve._one_probe = _ONE_PROBE
    return run


def _cases(layers: int) -> list:
    gen = make_design(layers)
    out = [(gen, dict(mode="train", optimizer="adam"), "a100-80gb"),
           (gen, dict(mode="train", optimizer="adam", batch=32), "a100-80gb"),
           (gen, dict(mode="inference", optimizer="none", batch=8), "rtx4090")]
    for name, kw, dev in (("resnet18", dict(mode="train", optimizer="adam", batch=8), "rtx3080-10gb"),
                          ("transformer_encoder", dict(mode="train", optimizer="adam", amp=True), "t4"),
                          ("seed_keras_audio", dict(mode="train", optimizer="sgd", batch=4), "h200"),
                          ("mobilenet_v2", dict(mode="train", optimizer="adamw", checkpointing=True), "t4"),
                          ("lstm_classifier", dict(mode="train", optimizer="adam"), "t4")):
        out.append((md.load_design(EX / f"{name}.json"), kw, dev))
    return out


def _ways(design, s, dev, an) -> dict:
    rep = md.estimate(design, s, device=dev, analysis=an)
    return {
        "estimate": lambda: md.estimate(design, s, device=dev, analysis=an),
        "3-probe largest": _three_probes(lambda: largest_batch_of(design, s, dev, an)),
        "largest": lambda: largest_batch_of(design, s, dev, an, report=rep),
        "largest alone": lambda: largest_batch_of(design, s, dev, an),
        "3-probe sweep": _three_probes(lambda: batch_sweep(design, s, dev, an)),
        "sweep": lambda: batch_sweep(design, s, dev, an, report=rep),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    cols = ("3-probe largest", "largest", "largest alone", "3-probe sweep", "sweep")
    print(f"{'design':<20} {'settings':<24} {'device':<12} {'largest':>8} {'estimate':>9} "
          + " ".join(f"{c:>20}" for c in cols))
    for design, kw, dev_id in _cases(args.layers):
        dev = get_device(dev_id)
        s = Settings(backend=dev.kind, **kw)
        an = analyze(design)
        fns = _ways(design, s, dev, an)
        got = {k: f() for k, f in fns.items()}  # (warm: the rules are compiled once per shape)
        times: dict = {k: [] for k in fns}
        for _ in range(args.repeat):
            for k, f in fns.items():
                t0 = time.process_time()
                f()
                times[k].append((time.process_time() - t0) * 1000)
        ms = {k: statistics.median(v) for k, v in times.items()}
        same = got["3-probe largest"] == got["largest"] == got["largest alone"] == got["sweep"].max_batch
        same = same and (got["3-probe sweep"].batches, got["3-probe sweep"].peaks) == (got["sweep"].batches,
                                                                                      got["sweep"].peaks)
        label = ",".join(f"{k}={v}" for k, v in kw.items() if k != "mode")
        print(f"{design.name[:20]:<20} {(kw['mode'][:5] + ' ' + label)[:24]:<24} {dev_id:<12} {got['largest']:>8} "
              f"{ms['estimate']:>7.2f}ms " + " ".join(f"{ms[c]:>9.2f}ms ({ms[c] / ms['estimate']:>4.2f}x)" for c in cols)
              + ("" if same else "  MISMATCH"))


if __name__ == "__main__":
    main()
