"""Fourth holdout round: benchmarks/holdout4_models.py (one configuration per case) against the truth
harness (shared/truth/measure.py, method a), stored in benchmarks/holdout4_truth.json. Same
measuring and comparing as benchmarks/holdout3.py, on other cases; a case made with
gradient_checkpointing_enable() is estimated with the checkpoint_layers setting.

    PYTHONPATH=. /work/bench-venv/bin/python benchmarks/holdout4.py --measure   # measure what is missing
    PYTHONPATH=. /work/bench-venv/bin/python benchmarks/holdout4.py             # compare
    PYTHONPATH=. /work/bench-venv/bin/python benchmarks/holdout4.py --model qwen3_clm-gc-adamw-b2 --json o.json
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import holdout3 as h3  # noqa: E402
from _tables import measured_models_main  # noqa: E402

TRUTH_JSON = HERE / "holdout4_truth.json"


def main(argv=None) -> int:
    import holdout4_models as hm

    def measure_all(names, truth_dir, out, remeasure=False):
        return h3.measure_all(names, truth_dir, out, remeasure, hm=hm)

    def run(names, truth):
        return h3.run(names, truth, hm=hm)

    return measured_models_main(argv, __doc__, TRUTH_JSON, hm.CASES, h3.load_truth, measure_all, run, h3.table,
                                h3.summary)


if __name__ == "__main__":
    sys.exit(main())
