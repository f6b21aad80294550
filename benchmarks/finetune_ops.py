"""Single ops with frozen parameters, measured with the truth harness (shared/truth/measure.py,
method a), stored with their designs in tests/fixtures/finetune_ops.json so that
tests/engine/test_finetune.py checks the rules without torch.

    PYTHONPATH=. /work/bench-venv/bin/python benchmarks/finetune_ops.py   # re-measure (torch + peft)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.nn as nn

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from memdesigner.engine.settings import Settings  # noqa: E402
from memdesigner.importers.torch_fx import from_module  # noqa: E402
from memdesigner.io.design_file import design_to_dict  # noqa: E402

OUT = REPO / "tests" / "fixtures" / "finetune_ops.json"


class _Tokens(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 32)
        self.fc = nn.Linear(32, 16)
        self.truth_input = ("tokens", 100)

    def forward(self, x):
        return self.fc(self.emb(x))


class _RMSNorm(nn.Module):
    """transformers' LlamaRMSNorm with x * x for pow(2) (the traced pow's backward temporaries
    are another matter: this case is about the frozen weight's multiply)."""

    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))

    def forward(self, x):
        h = x.to(torch.float32)
        v = (h * h).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(v + 1e-6)).to(x.dtype)


class _Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(32, 128)
        self.down = nn.Linear(128, 32)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(x)))


class _Stack(nn.Module):
    """Decoder-like layers ``layers.<k>``; ``ckpt`` checkpoints each one the way transformers'
    gradient_checkpointing_enable() does (non-reentrant). The design is imported without it."""

    def __init__(self, ckpt=False):
        super().__init__()
        self.inp = nn.Linear(32, 32)
        self.layers = nn.ModuleList(_Layer() for _ in range(3))
        self.head = nn.Linear(32, 16)
        self.ckpt = ckpt

    def forward(self, x):
        h = self.inp(x)
        for layer in self.layers:
            if self.ckpt:
                h = torch.utils.checkpoint.checkpoint(layer, h, use_reentrant=False)
            else:
                h = layer(h)
        return self.head(h)


class _Block(nn.Module):
    """Named projections for peft's target_modules (q_proj, v_proj, a head)."""

    def __init__(self):
        super().__init__()
        self.q_proj = nn.Linear(32, 64)
        self.v_proj = nn.Linear(64, 64, bias=False)
        self.norm = nn.LayerNorm(64)
        self.lm_head = nn.Linear(64, 16)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.q_proj(x))
        return self.lm_head(self.norm(self.v_proj(h) + h))


# name -> (factory, per-sample input shape, frozen module-name prefixes, settings)
CASES = {
    "linear_frozen_middle": (lambda: nn.Sequential(nn.Linear(32, 64), nn.Linear(64, 64), nn.Linear(64, 16)),
                             (8, 32), ("1",), {}),
    "linear_frozen_first": (lambda: nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 16)),
                            (8, 32), ("0",), {}),
    "linear_frozen_last": (lambda: nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 16)),
                           (8, 32), ("2",), {}),
    "linear_frozen_middle_adam": (lambda: nn.Sequential(nn.Linear(32, 64), nn.Linear(64, 64), nn.Linear(64, 16)),
                                  (8, 32), ("1",), {"optimizer": "adam"}),
    "linear_frozen_middle_amp": (lambda: nn.Sequential(nn.Linear(32, 64), nn.Linear(64, 64), nn.Linear(64, 16)),
                                 (8, 32), ("1",), {"amp": True, "optimizer": "adam"}),
    "conv_frozen_middle": (lambda: nn.Sequential(nn.Conv2d(3, 8, 3), nn.Conv2d(8, 8, 3), nn.Conv2d(8, 4, 3)),
                           (3, 16, 16), ("1",), {}),
    "conv_frozen_first": (lambda: nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Conv2d(8, 4, 3)),
                          (3, 16, 16), ("0",), {}),
    "layernorm_frozen_middle": (lambda: nn.Sequential(nn.Linear(32, 64), nn.LayerNorm(64), nn.Linear(64, 16)),
                                (8, 32), ("1",), {}),
    "batchnorm_frozen_middle": (lambda: nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.Conv2d(8, 4, 3)),
                                (3, 16, 16), ("1",), {}),
    "rmsnorm_frozen_middle": (lambda: nn.Sequential(nn.Linear(32, 64), _RMSNorm(64), _RMSNorm(64), _RMSNorm(64),
                                                    nn.Linear(64, 256)), (8, 32), ("1", "2", "3"), {}),
    "embedding_frozen": (_Tokens, (12,), ("emb",), {}),
    "lora_all_linear": (_Block, (8, 32), (), {"optimizer": "adam", "lora_r": 4, "lora_alpha": 8}),
    "lora_v_proj": (_Block, (8, 32), (), {"optimizer": "adam", "lora_r": 4, "lora_targets": ("v_proj",)}),
    "lora_dropout": (_Block, (8, 32), (), {"optimizer": "adam", "lora_r": 4, "lora_dropout": 0.1}),
    "lora_amp": (_Block, (8, 32), (), {"optimizer": "adamw", "lora_r": 8, "lora_alpha": 16, "amp": True}),
    "checkpoint_layers": (_Stack, (16, 32), (), {"optimizer": "adam", "checkpoint_layers": True}),
    "checkpoint_layers_frozen_start": (_Stack, (16, 32), ("inp", "layers.0"), {"checkpoint_layers": True}),
    "all_but_head_frozen": (lambda: nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                                                  nn.Linear(64, 16)), (8, 32), ("0", "2"), {"optimizer": "adam"}),
}
BASE = {"mode": "train", "batch": 4, "optimizer": "sgd", "backend": "cpu"}


def _frozen(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def measure_case(name: str) -> dict:
    sys.path.insert(0, "/work/shared/truth")
    from measure import measure  # noqa: E402 - the harness lives outside the package

    factory, shape, prefixes, extra = CASES[name]
    kw = dict(BASE, **extra)

    def make():
        m = factory(ckpt=True) if kw.get("checkpoint_layers") else factory()
        for pn, p in m.named_parameters():
            if _frozen(pn.rsplit(".", 1)[0], prefixes):
                p.requires_grad_(False)
        if kw.get("lora_r"):  # peft, as people apply it (the benchmark venv has peft)
            from peft import LoraConfig, get_peft_model

            m = get_peft_model(m, LoraConfig(r=kw["lora_r"], lora_alpha=kw.get("lora_alpha", 8),
                                             lora_dropout=kw.get("lora_dropout", 0.0),
                                             target_modules=list(kw.get("lora_targets", ())) or "all-linear",
                                             # a plain module has no get_output_embeddings(): leave out
                                             # the head by name, as peft does for a transformers model
                                             exclude_modules=None if kw.get("lora_targets") else ["lm_head"]))
        return m, shape

    torch.manual_seed(0)
    design = from_module(factory(), shape, name=name)
    from memdesigner.engine.finetune import module_path

    for node in design.nodes.values():
        if _frozen(module_path(node), prefixes):
            node.trainable = False
    s = Settings(**kw)
    rec = measure(make, batch=s.batch, mode="train", optimizer=s.optimizer, dtype="fp32",
                  amp=s.amp, methods="a", name=name)
    module, _ = make()
    trainable = sum(p.numel() for p in module.parameters() if p.requires_grad)
    kw = {k: list(v) if isinstance(v, tuple) else v for k, v in kw.items()}
    return {"settings": kw, "frozen": list(prefixes), "peak_bytes": rec["method_a"]["peak_overall"],
            "trainable_params": trainable,
            "torch": torch.__version__, "design": design_to_dict(design)}


def main(argv=None) -> int:
    only = (argv if argv is not None else sys.argv[1:])  # case names: re-measure just those
    data = json.loads(OUT.read_text()) if only and OUT.exists() else {}
    data.update({name: measure_case(name) for name in CASES if not only or name in only})
    OUT.write_text(json.dumps(data, indent=1) + "\n")
    for k, v in data.items():
        print(f"{k}: {v['peak_bytes']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
