"""Accuracy mechanisms of issue 20 (benchmarks/mechanisms_models.py) against the truth harness
(shared/truth/measure.py, method a), stored in benchmarks/mechanisms_truth.json. Same measuring
and comparing as benchmarks/holdout3.py; ``--before CHECKOUT`` also runs the comparison with
another checkout's memdesigner and prints both side by side.

    PYTHONPATH=. /work/venvs/b457/bin/python benchmarks/mechanisms.py --measure          # measure what is missing
    PYTHONPATH=. /work/venvs/b457/bin/python benchmarks/mechanisms.py --before /work/main
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import holdout3 as h3  # noqa: E402
from _tables import measured_models_main  # noqa: E402

if os.environ.get("MECHANISMS_CHECKOUT"):  # --before: that checkout's memdesigner (holdout3 put this tree's first)
    sys.path.insert(0, os.environ["MECHANISMS_CHECKOUT"])

TRUTH_JSON = HERE / "mechanisms_truth.json"


def _rows_with(checkout: str, argv: list) -> list:
    """The rows this script gives with ``checkout``'s memdesigner."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rows.json"
        env = dict(os.environ, MECHANISMS_CHECKOUT=str(Path(checkout).resolve()))
        subprocess.run([sys.executable, __file__, *argv, "--json", str(out)], env=env, check=True,
                       capture_output=True, text=True)
        return json.loads(out.read_text())["rows"]


def before_after(before: list, after: list) -> str:
    b = {r["case"]: r for r in before}
    lines = ["| case | measured MiB | before % | after % |", "|---|---:|---:|---:|"]
    for r in after:
        was = b.get(r["case"])
        was_s = f"{100 * was['rel_error']:+.2f}" if was else "fails"
        lines.append(f"| {r['case']} | {r['measured_bytes'] / 2 ** 20:.2f} | {was_s} | {100 * r['rel_error']:+.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    import mechanisms_models as hm

    argv = list(sys.argv[1:] if argv is None else argv)
    before = None
    if "--before" in argv:
        i = argv.index("--before")
        before = argv[i + 1]
        del argv[i:i + 2]

    def measure_all(names, truth_dir, out, remeasure=False):
        return h3.measure_all(names, truth_dir, out, remeasure, hm=hm)

    def run(names, truth):
        return h3.run(names, truth, hm=hm)

    if before is None:
        return measured_models_main(argv, __doc__, TRUTH_JSON, hm.CASES, h3.load_truth, measure_all, run, h3.table,
                                    h3.summary)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rows.json"
        rc = measured_models_main(argv + ["--json", str(out)], __doc__, TRUTH_JSON, hm.CASES, h3.load_truth,
                                  measure_all, run, h3.table, h3.summary)
        after = json.loads(out.read_text())["rows"]
    print()
    print(before_after(_rows_with(before, [a for a in argv if a not in ("--measure", "--remeasure")]), after))
    return rc


if __name__ == "__main__":
    sys.exit(main())
