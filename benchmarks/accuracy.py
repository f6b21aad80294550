"""Accuracy of memdesigner's estimate against the measured ground truth (shared/truth).

Every zoo model is imported from PyTorch (built on the meta device and traced with meta tensors:
no memory is used, not even for seed_keras_audio's 2.9 GiB of weights), every measured
configuration in cases.json (and cases_amp.json, the mixed-precision grid) is estimated with
backend "cpu", and the estimate is compared with method (a)'s ``peak_overall``.

    python benchmarks/accuracy.py                      # markdown table + summary
    python benchmarks/accuracy.py --json accuracy.json # also write the rows as JSON
    python benchmarks/accuracy.py --no-amp --worst 10 --model resnet18

Needs torch (for the import); the truth folder defaults to ../shared/truth next to the repository
(override with --truth-dir or MEMDESIGNER_TRUTH_DIR).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
for _p in (str(REPO), str(Path(__file__).resolve().parent)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from _tables import OPTIMIZERS, default_truth_dir, measured_phases, mib, phase_cells  # noqa: E402

MiB = 1024.0 * 1024.0


def load_records(truth: Path, amp_grid: bool) -> list[dict]:
    recs = []
    for fname, grid in (("cases.json", "fp32"), ("cases_amp.json", "amp")):
        if grid == "amp" and not amp_grid:
            continue
        p = truth / fname
        if not p.exists():
            print(f"warning: {p} not found", file=sys.stderr)
            continue
        for r in json.loads(p.read_text()):
            r = dict(r)
            r["_grid"] = grid
            recs.append(r)
    return recs


def import_zoo(truth: Path, names) -> dict:
    from memdesigner.importers.torch_fx import import_file

    designs = {}
    for name in sorted(names):
        try:
            designs[name] = import_file(f"{truth / 'zoo.py'}:{name}")
        except Exception as err:  # noqa: BLE001 - a benchmark reports and goes on
            print(f"warning: {name}: import failed: {err}", file=sys.stderr)
    return designs


def estimate_record(design, rec: dict) -> dict:
    import memdesigner

    mode = rec["mode"]
    amp = bool(rec.get("amp", False))
    opt = OPTIMIZERS.get(rec.get("optimizer"), rec.get("optimizer")) if mode == "train" else "none"
    rep = memdesigner.estimate(design, mode=mode, batch=int(rec["batch"]), optimizer=opt,
                               dtype=rec.get("dtype", "fp32"), amp=amp, backend="cpu",
                               foreach=rec.get("foreach"))
    meas = rec["method_a"]["peak_overall"]
    est = rep.peak_bytes
    steady = rec["method_a"].get("steady", {})
    pm = measured_phases(steady, mode)
    pe = {k: rep.phase_peaks.get(k) for k in pm}
    return {
        "model": rec["model"], "mode": mode, "dtype": rec.get("dtype", "fp32"), "amp": amp,
        "optimizer": rec.get("optimizer") or "-", "foreach": rec.get("foreach"), "batch": rec["batch"],
        "grid": rec["_grid"], "measured_bytes": meas, "estimated_bytes": est,
        "rel_error": (est - meas) / meas if meas else 0.0,
        "phase_estimated": pe, "phase_measured": pm,
        "params_estimated": rep.params, "params_measured": rec.get("params"),
        "peak_phase": rep.peak_phase, "peak_layer": rep.peak_layer,
        "peak_contents": rec["method_a"].get("peak_contents", {}),
    }


def _pct(x) -> str:
    return f"{100 * x:+.2f}"


def markdown_table(rows: list[dict]) -> str:
    head = ("| model | mode | dtype | optimizer | batch | measured MiB | estimated MiB | rel err % | "
            "fwd est/meas | bwd est/meas | step est/meas |")
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        dt = r["dtype"] + ("+amp" if r["amp"] else "")
        opt = r["optimizer"] + (" (foreach)" if r["foreach"] else "")
        ph = phase_cells(r)
        lines.append(f"| {r['model']} | {r['mode']} | {dt} | {opt} | {r['batch']} | {mib(r['measured_bytes'])} | "
                     f"{mib(r['estimated_bytes'])} | {_pct(r['rel_error'])} | " + " | ".join(ph) + " |")
    return "\n".join(lines)


def summary(rows: list[dict]) -> dict:
    def stats(sel):
        errs = [abs(r["rel_error"]) for r in sel]
        if not errs:
            return None
        worst = max(sel, key=lambda r: abs(r["rel_error"]))
        return {"n": len(errs), "median_abs_rel_error": statistics.median(errs), "worst_abs_rel_error": max(errs),
                "worst": f"{worst['model']} {worst['mode']} {worst['dtype']}{'+amp' if worst['amp'] else ''} "
                         f"{worst['optimizer']} b{worst['batch']}",
                "exact": sum(1 for r in sel if r["estimated_bytes"] == r["measured_bytes"]),
                "within_1pct": sum(1 for e in errs if e <= 0.01)}

    out = {"overall": stats(rows)}
    for mode in ("inference", "train"):
        out[mode] = stats([r for r in rows if r["mode"] == mode])
    for grid in ("fp32", "amp"):
        out[f"grid {grid}"] = stats([r for r in rows if r["grid"] == grid])
    return out


def format_summary(s: dict) -> str:
    lines = ["| subset | n | median abs err % | worst abs err % | exact | within 1% | worst case |", "|---|---|---|---|---|---|---|"]
    for k, v in s.items():
        if v is None:
            continue
        lines.append(f"| {k} | {v['n']} | {100 * v['median_abs_rel_error']:.2f} | {100 * v['worst_abs_rel_error']:.2f} | "
                     f"{v['exact']} | {v['within_1pct']} | {v['worst']} |")
    return "\n".join(lines)


def run(truth: Path, amp_grid: bool = True, include_all: bool = False, models=None) -> list[dict]:
    recs = load_records(truth, amp_grid)
    if models:
        recs = [r for r in recs if r["model"] in models]
    if not include_all:
        recs = [r for r in recs if not (r["model"] == "seed_keras_audio" and r["mode"] == "train")]
    designs = import_zoo(truth, {r["model"] for r in recs})
    rows = []
    for r in recs:
        d = designs.get(r["model"])
        if d is None:
            continue
        rows.append(estimate_record(d, r))
    rows.sort(key=lambda r: (r["grid"], r["model"], r["mode"], r["dtype"], r["optimizer"], str(r["foreach"]), r["batch"]))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--truth-dir", default=None, help="folder with zoo.py and cases.json (default ../shared/truth)")
    ap.add_argument("--amp-grid", dest="amp", action="store_true", default=True,
                    help="also estimate cases_amp.json (the default)")
    ap.add_argument("--no-amp", dest="amp", action="store_false", help="only cases.json")
    ap.add_argument("--all", action="store_true", help="include seed_keras_audio training")
    ap.add_argument("--model", action="append", help="only these models (repeatable)")
    ap.add_argument("--worst", type=int, default=0, help="also list the N worst rows")
    ap.add_argument("--json", default=None, help="write rows and summary as JSON to this file")
    args = ap.parse_args(argv)
    truth = Path(args.truth_dir) if args.truth_dir else default_truth_dir()
    if not (truth / "cases.json").exists():
        print(f"error: {truth}/cases.json not found (use --truth-dir)", file=sys.stderr)
        return 2
    rows = run(truth, args.amp, args.all, args.model)
    print(markdown_table(rows))
    s = summary(rows)
    print()
    print(format_summary(s))
    if args.worst:
        print()
        print(f"worst {args.worst}:")
        print(markdown_table(sorted(rows, key=lambda r: -abs(r["rel_error"]))[: args.worst]))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "summary": s}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
