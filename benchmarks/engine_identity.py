"""Does a faster engine still give byte-identical reports? Estimates every example design (and the
HF configs, a generated 1,000-op design and a block design) under many settings, in this tree and
in another one, and compares the full reports (peak, timeline, per-layer rows, largest batch, the
live set at the peak).

    python benchmarks/engine_identity.py --against /work/main

Prints the cases that differ (none: exit 0) and how many were compared.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
EX = HERE.parent / "resources" / "examples"

SETTINGS = [
    dict(mode="inference", batch=3),
    dict(mode="inference", batch=2, dtype="fp16", device="rtx4090", max_batch=True),
    dict(mode="train", batch=2, optimizer="adam"),
    dict(mode="train", batch=2, optimizer="adam", backend="cpu"),
    dict(mode="train", batch=2, optimizer="sgd", amp=True, device="t4", max_batch=True),
    dict(mode="train", batch=2, optimizer="adamw", dtype="bf16", checkpointing=True),
    dict(mode="train", batch=2, optimizer="momentum", foreach=False),
    dict(mode="train", batch=2, optimizer="adam", gpus=2, strategy="zero3"),
    dict(mode="train", batch=2, optimizer="adam", gpus=4, strategy="ddp", device="a100-80gb"),
    dict(mode="train", batch=2, optimizer="adam", gpus=2, strategy="zero1"),
    dict(mode="train", batch=2, optimizer="adam", grad_accum=2, master_weights=True, dtype="bf16"),
]
HF_SETTINGS = [
    dict(mode="train", batch=1, optimizer="adamw", dtype="bf16", lora_r=8, checkpoint_layers=True),
    dict(mode="train", batch=1, optimizer="adamw", dtype="bf16", lora_r=16, lora_targets=("q_proj", "v_proj"),
         base_bits=4),
    dict(mode="generate", batch=2, dtype="bf16", new_tokens=4),
]


def _designs():
    import memdesigner as md
    from memdesigner.importers.hf_config import import_file

    sys.path.insert(0, str(HERE))
    from blocks_llama import block_design
    from engine_speed import make_design

    out = [(p.stem, md.load_design(p)) for p in sorted(EX.glob("*.json"))]
    out.append(("generated-1000", make_design(1000)))
    out.append(("blocks-llama-x3", block_design(3)))
    hf = [(f"hf/{p.stem}", import_file(p, seq_len=64)) for p in sorted((EX / "hf").glob("*.json"))]
    return out, hf


def _digest(rep) -> str:
    return hashlib.sha256(json.dumps(rep.to_dict(), sort_keys=True, default=str).encode()).hexdigest()[:16]


def run_cases() -> dict:
    import memdesigner as md
    from memdesigner.engine.estimate import explain_peak

    designs, hf = _designs()
    out = {}
    for name, d in designs + hf:
        for i, kw in enumerate(SETTINGS + (HF_SETTINGS if name.startswith("hf/") else [])):
            key = f"{name} #{i}"
            try:
                rep = md.estimate(d, **kw)
                out[key] = [rep.peak_bytes, rep.max_batch, _digest(rep)]
            except Exception as exc:  # noqa: BLE001 - the same error both ways is identical too
                out[key] = f"{type(exc).__name__}: {exc}"
        if not name.startswith("hf/"):
            try:
                rows = explain_peak(d, mode="train", batch=2, optimizer="adam")
                out[f"{name} explain"] = hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()[:16]
            except Exception as exc:  # noqa: BLE001
                out[f"{name} explain"] = f"{type(exc).__name__}: {exc}"
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", help="another checkout (its memdesigner is imported via PYTHONPATH)")
    ap.add_argument("--emit", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.emit or not a.against:
        print(json.dumps(run_cases()))
        return 0
    env = dict(os.environ, PYTHONPATH=str(Path(a.against).resolve()))
    theirs = json.loads(subprocess.run([sys.executable, __file__, "--emit"], env=env, check=True,
                                       capture_output=True, text=True, cwd=a.against).stdout)
    ours = run_cases()
    diff = [k for k in sorted(set(ours) | set(theirs)) if ours.get(k) != theirs.get(k)]
    for k in diff:
        print(f"DIFFERS {k}: ours {ours.get(k)} theirs {theirs.get(k)}")
    print(f"{len(ours)} cases compared, {len(diff)} differ")
    return 1 if diff else 0


if __name__ == "__main__":
    raise SystemExit(main())
