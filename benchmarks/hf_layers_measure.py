"""Measure the single-layer cases of tests/hf_layer_cases.py (HF LlamaRMSNorm, GemmaRMSNorm,
rotary embeddings) with the truth harness into tests/fixtures/hf/layers_measured.json. Runs in
the benchmark venv: PYTHONPATH=. /work/bench-venv/bin/python benchmarks/hf_layers_measure.py"""

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]
sys.path.insert(0, str(REPO / "benchmarks"))
import hf_layer_cases as cases  # noqa: E402
from _tables import default_truth_dir  # noqa: E402

OUT = REPO / "tests" / "fixtures" / "hf" / "layers_measured.json"


def main() -> int:
    sys.path.insert(0, str(default_truth_dir()))
    from measure import measure

    res = {}
    for kind in cases.KINDS:
        for key, mode, opt, amp in cases.MODES:
            def make(kind=kind):
                return cases.module(kind), (cases.T, cases.IN)
            rec = measure(make, batch=cases.BATCH, mode=mode, optimizer=opt or "sgd", dtype="fp32", amp=amp,
                          methods="a", name=kind)
            res[f"{kind}/{key}"] = rec["method_a"]["peak_overall"]
            print(kind, key, res[f"{kind}/{key}"], flush=True)
    OUT.write_text(json.dumps({"torch": rec["torch"], "batch": cases.BATCH, "peaks": res}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
