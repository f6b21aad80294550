"""The largest batch and the peak-vs-batch curve: the batch curve (three runs and one or two
exact checks) against the search it replaced (doubling + bisection, one simulation per step).

    python3 benchmarks/batch_curve_speed.py [--layers 1000] [--repeat 5]

Prints a table: design, settings, device, largest batch (both ways, must agree), simulations
and median / p95 milliseconds of each way.
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
from memdesigner.engine.batch_curve import batch_curve  # noqa: E402
from memdesigner.engine.devices import get_device  # noqa: E402
from memdesigner.engine.estimate import peak_for_batch  # noqa: E402
from memdesigner.engine.search import largest_fitting  # noqa: E402
from memdesigner.engine.settings import Settings  # noqa: E402
from memdesigner.model.analysis import analyze  # noqa: E402

EX = Path(__file__).parent.parent / "resources" / "examples"


def _times(fn, repeat):
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = fn()
        out.append((time.perf_counter() - t0) * 1000)
    out.sort()
    return res, statistics.median(out), out[int(0.95 * (len(out) - 1))]


def _search(design, s, dev, an, count):
    def run():
        count[0] = 0

        def fits(b):
            count[0] += 1
            return peak_for_batch(design, s, dev, an, b) <= dev.memory_bytes
        return largest_fitting(fits, 1, 1 << 24)
    return run


def _curve(design, s, dev, an):
    def run():
        c = batch_curve(design, s, dev, an)
        return c.largest_batch(dev.memory_bytes), c.runs
    return run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    cases = [(make_design(args.layers), dict(mode="train", optimizer="adam"), "a100-80gb"),
             (make_design(args.layers), dict(mode="inference", optimizer="none"), "rtx4090")]
    for name, kw, dev in (("resnet18", dict(mode="train", optimizer="adam"), "rtx3080-10gb"),
                          ("transformer_encoder", dict(mode="train", optimizer="adam", amp=True), "t4"),
                          ("seed_keras_audio", dict(mode="train", optimizer="sgd"), "h200"),
                          ("lstm_classifier", dict(mode="train", optimizer="adam"), "t4")):
        cases.append((md.load_design(EX / f"{name}.json"), kw, dev))
    print(f"{'design':<22} {'settings':<22} {'device':<13} {'largest':>10} {'search sims':>11} {'search ms':>16} "
          f"{'curve sims':>10} {'curve ms':>16}")
    for design, kw, dev_id in cases:
        dev = get_device(dev_id)
        s = Settings(backend=dev.kind, **kw)
        an = analyze(design)
        count = [0]
        search = _search(design, s, dev, an, count)
        curve = _curve(design, s, dev, an)
        b_search, sm, sp = _times(search, args.repeat)
        (b_curve, runs), cm, cp = _times(curve, args.repeat)
        flag = "" if b_search == b_curve else "  MISMATCH"
        label = ",".join(f"{k}={v}" for k, v in kw.items() if k != "mode") or "inference"
        print(f"{design.name[:22]:<22} {kw['mode'][:5] + ' ' + label[:16]:<22} {dev_id:<13} {b_curve:>10} "
              f"{count[0]:>11} {sm:>7.1f} / {sp:>6.1f} {runs:>10} {cm:>7.1f} / {cp:>6.1f}{flag}")


if __name__ == "__main__":
    main()
