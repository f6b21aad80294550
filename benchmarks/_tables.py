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
