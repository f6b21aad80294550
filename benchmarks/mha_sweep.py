"""nn.MultiheadAttention and nn.TransformerEncoderLayer, measured against the estimate: small
shapes (seconds each), the variants that change what autograd keeps (need_weights, dropout,
masks, is_causal, batch_first, eval / no_grad) and the encoder layer (norm_first True/False).

    PYTHONPATH=. /work/bench-venv/bin/python benchmarks/mha_sweep.py --measure   # measure + compare
    python benchmarks/mha_sweep.py                  # compare with the stored mha_sweep_truth.json
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for p in (str(REPO), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

import holdout  # noqa: E402

TRUTH_JSON = HERE / "mha_sweep_truth.json"
L, E, H = 32, 128, 4


def _mha(need=True, dropout=0.0, batch_first=True, kpm=False, mask=None, causal=False, L=L, E=E, H=H):
    import torch
    import torch.nn as nn

    class MHA(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(E, H, dropout=dropout, batch_first=batch_first)

        def forward(self, x):
            kw = {"need_weights": need}
            if kpm == "traced":  # made from the input, as models do (fx traces it; torch.zeros(x.shape[0]) it cannot)
                kw["key_padding_mask"] = x[..., 0] != x[..., 0]
            elif kpm:
                kw["key_padding_mask"] = torch.zeros(x.shape[0], L, dtype=torch.bool, device=x.device)
            if mask is not None:
                m = torch.full((L, L), float("-inf"), device=x.device).triu(1)
                kw["attn_mask"] = m if mask == "float" else m.isinf()
                kw["is_causal"] = causal
            if not batch_first:
                x = x.transpose(0, 1)
            y = self.attn(x, x, x, **kw)[0]
            return y if batch_first else y.transpose(0, 1)

    return lambda: (MHA(), (L, E))


def _encoder(norm_first, dropout=0.1, batch_first=True):
    import torch.nn as nn

    class SeqFirst(nn.Module):
        """The encoder on the (L, B, E) transposed view of the (B, L, E) input."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner(x.transpose(0, 1)).transpose(0, 1)

    def make():
        # inside a model, as it is used (a top-level module's own forward is not a module call)
        m = nn.Sequential(nn.TransformerEncoderLayer(E, H, dim_feedforward=4 * E, dropout=dropout,
                                                     batch_first=batch_first, norm_first=norm_first))
        return (m if batch_first else SeqFirst(m)), (L, E)
    return make


CASES = {
    "mha_weights": _mha(),
    "mha_fused": _mha(need=False),
    "mha_weights_long": _mha(L=64, E=64, H=2),
    "mha_fused_long": _mha(need=False, L=64, E=64, H=2),
    "mha_weights_long_drop": _mha(dropout=0.1, L=64, E=64, H=2),
    "mha_weights_short": _mha(L=16, E=128, H=2),
    "mha_fused_short": _mha(need=False, L=16, E=128, H=2),
    "mha_fused_short_drop": _mha(need=False, dropout=0.1, L=16, E=128, H=2),
    "mha_weights_drop": _mha(dropout=0.1),
    "mha_fused_drop": _mha(need=False, dropout=0.1),
    "mha_weights_kpm": _mha(kpm=True),
    "mha_fused_kpm": _mha(need=False, kpm=True),
    "mha_weights_kpm_traced": _mha(kpm="traced"),
    "mha_fused_kpm_traced": _mha(need=False, kpm="traced"),
    "mha_weights_long_kpm_traced": _mha(kpm="traced", L=64, E=64, H=2),
    "mha_weights_mask": _mha(mask="float"),
    "mha_fused_mask": _mha(need=False, mask="bool"),
    "mha_fused_causal": _mha(need=False, mask="bool", causal=True),
    "mha_seqfirst": _mha(batch_first=False),
    "mha_seqfirst_fused": _mha(need=False, batch_first=False),
    "mha_seqfirst_long": _mha(batch_first=False, L=64, E=64, H=2),
    "mha_seqfirst_fused_long": _mha(need=False, batch_first=False, L=64, E=64, H=2),
    "mha_seqfirst_drop": _mha(dropout=0.1, batch_first=False),
    "mha_seqfirst_kpm_traced": _mha(batch_first=False, kpm="traced"),
    "mha_seqfirst_fused_long_kpm_traced": _mha(need=False, batch_first=False, kpm="traced", L=64, E=64, H=2),
    "encoder_post": _encoder(False),
    "encoder_pre": _encoder(True),
    "encoder_post_nodrop": _encoder(False, 0.0),
    "encoder_post_seqfirst": _encoder(False, batch_first=False),
    "encoder_pre_seqfirst": _encoder(True, batch_first=False),
}
GRID = [("train-sgd-fp32-b4", "train", "sgd", "fp32", 4, False),
        ("inference-fp32-b4", "inference", None, "fp32", 4, False)]


def import_case(name):
    import torch

    from memdesigner.importers.torch_fx import from_module

    with torch.device("meta"):
        module, shape = CASES[name]()
    return from_module(module, shape, name=name)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--measure", action="store_true")
    ap.add_argument("--remeasure", action="store_true")
    ap.add_argument("--cases", default="")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    names = [c for c in args.cases.split(",") if c] or list(CASES)
    truth = holdout.load_truth(TRUTH_JSON)
    if args.measure:
        for name in names:
            for cfg in GRID:
                k = f"{name}/{cfg[0]}"
                if k in truth and not args.remeasure:
                    continue
                t0 = time.perf_counter()
                truth[k] = holdout.measure_one(CASES[name], name, cfg, holdout.default_truth_dir())
                print(f"measured {k}: {truth[k]['peak_overall']} ({time.perf_counter() - t0:.1f} s)",
                      file=sys.stderr, flush=True)
                TRUTH_JSON.write_text(json.dumps(dict(sorted(truth.items())), indent=1) + "\n")
    rows, warn = [], {}
    for name in names:
        design = import_case(name)
        gen = holdout.generic_nodes(design)
        if gen or design.import_warnings:
            warn[name] = (gen, list(design.import_warnings))
        for cfg in GRID:
            rec = truth.get(f"{name}/{cfg[0]}")
            if rec:
                rows.append(holdout.estimate_row(design, rec))
    print(holdout.markdown_table(rows))
    print()
    print(holdout.format_summary(holdout.summary(rows), {"import_failures": {}, "generic": {}, "import_warnings": {},
                                                        "measure_failures": {}, "missing": []}))
    for name, (gen, w) in warn.items():
        print(f"{name}: generic {gen} warnings {w}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows}, indent=1) + "\n")
    else:
        print(json.dumps({r["model"] + "/" + r["config"]: round(r["rel_error"], 5) for r in rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
