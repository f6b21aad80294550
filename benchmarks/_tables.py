"""Helpers shared by the accuracy benchmarks (zoo and holdout): where the truth lives, the
optimizer names, and table formatting."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# the truth harness's optimizer names -> memdesigner's
OPTIMIZERS = {"sgd": "sgd", "sgd_momentum": "momentum", "adam": "adam", "adamw": "adamw", None: "none"}


def default_truth_dir() -> Path:
    env = os.environ.get("MEMDESIGNER_TRUTH_DIR")
    if env:
        return Path(env)
    return (REPO / ".." / "shared" / "truth").resolve()

MiB = 1024.0 * 1024.0
PHASES = ("forward", "backward", "optimizer_step")


def mib(b) -> str:
    return "-" if b is None else f"{b / MiB:.2f}"


def phase_cells(r: dict) -> list:
    """'estimated / measured' MiB per phase, '-' where the run has no such phase."""
    out = []
    for k in PHASES:
        if k in r["phase_measured"]:
            out.append(f"{mib(r['phase_estimated'].get(k))} / {mib(r['phase_measured'].get(k))}")
        else:
            out.append("-")
    return out


def measured_phases(steady: dict, mode: str) -> dict:
    """The truth record's steady-state phase peaks, in the engine's phases (loss joins forward)."""
    if mode != "train":
        return {"forward": steady.get("peak_forward")}
    return {"forward": max(steady.get("peak_forward", 0), steady.get("peak_loss", 0)),
            "backward": steady.get("peak_backward"), "optimizer_step": steady.get("peak_step")}


def findings_lines(info: dict, generic_shown: int = 6, missing_shown: int | None = None) -> list:
    """The import and measurement findings under a benchmark's summary line."""
    lines = [f"import failure: {name}: {err}" for name, err in info["import_failures"].items()]
    for name, gen in info["generic"].items():
        more = ", ..." if len(gen) > generic_shown else ""
        lines.append(f"Generic nodes: {name}: {len(gen)} ({', '.join(gen[:generic_shown])}{more})")
    lines += [f"measure failure: {k}: {err}" for k, err in info["measure_failures"].items()]
    missing = info["missing"]
    if missing:
        lines.append(f"not measured: {', '.join(missing)}" if missing_shown is None else
                     f"not measured: {len(missing)} ({', '.join(missing[:missing_shown])} ...)")
    return lines


def add_truth_args(ap, truth_json) -> None:
    """The options every measured benchmark takes: measuring, the truth folder and file, a model filter."""
    ap.add_argument("--measure", action="store_true", help="measure missing records with the truth harness first")
    ap.add_argument("--remeasure", action="store_true", help="with --measure: measure every record again")
    ap.add_argument("--truth-dir", default=None, help="folder with measure.py (default ../shared/truth)")
    ap.add_argument("--truth-json", default=str(truth_json), help="measured records")
    ap.add_argument("--model", action="append", help="only these models (repeatable)")


def selected_models(args, known) -> list | None:
    """--model's names, or every known model; None (after one stderr line) when one is unknown."""
    import sys

    models = args.model or list(known)
    unknown = [m for m in models if m not in known]
    if unknown:
        print(f"error: unknown model(s) {unknown}; known: {', '.join(known)}", file=sys.stderr)
        return None
    return models


def accuracy_summary(rows, info, noun: str, name_of) -> str:
    """The summary lines of a measured-models benchmark: median, worst (named by ``name_of``),
    how many within 1 % / 3 %, under-estimates, wrong parameter counts, import findings."""
    import statistics

    if not rows:
        return "no measured configurations (run with --measure)"
    errs = [abs(r["rel_error"]) for r in rows]
    worst = max(rows, key=lambda r: abs(r["rel_error"]))
    under = [r for r in rows if r["rel_error"] < -0.01]
    key = "case" if "case" in rows[0] else "model"
    bad_params = sorted({r[key] for r in rows if r["params_design"] != r["params_module"]})
    lines = [f"{noun}: {len(rows)}  median |err| {100 * statistics.median(errs):.2f} %  "
             f"worst |err| {100 * max(errs):.2f} % ({name_of(worst)})  "
             f"within 1 %: {sum(e <= 0.01 for e in errs)}  within 3 %: {sum(e <= 0.03 for e in errs)}  "
             f"under-estimates beyond 1 %: {len(under)}",
             f"parameter counts wrong: {len(bad_params)} ({', '.join(bad_params)})"]
    lines += findings_lines(info, generic_shown=5, missing_shown=6)
    return "\n".join(lines)


def measured_models_main(argv, doc: str, truth_json, known, load_truth, measure_all, run, table, summary) -> int:
    """The command line of a measured-models benchmark: pick models, measure what is missing
    (--measure), print the table and its summary, optionally the rows as JSON."""
    import argparse
    import json
    import sys

    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    add_truth_args(ap, truth_json)
    ap.add_argument("--json", default=None, help="write rows and import findings as JSON to this file")
    args = ap.parse_args(argv)
    names = selected_models(args, known)
    if names is None:
        return 2
    tj = Path(args.truth_json)
    if args.measure:
        truth_dir = Path(args.truth_dir) if args.truth_dir else default_truth_dir()
        if not (truth_dir / "measure.py").exists():
            print(f"error: {truth_dir}/measure.py not found (use --truth-dir)", file=sys.stderr)
            return 2
        measure_all(names, truth_dir, tj, args.remeasure)
    rows, info = run(names, load_truth(tj))
    print(table(rows))
    print()
    print(summary(rows, info))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "import": info}, indent=1) + "\n")
    return 0
