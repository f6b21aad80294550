"""Fine-tuning options of the CLI (frozen parts, LoRA / QLoRA, gradient accumulation)."""

from __future__ import annotations

import argparse

KEYS = ("freeze", "lora_r", "lora_alpha", "lora_dropout", "lora_targets", "base_bits", "grad_accum",
        "checkpoint_layers", "master_weights", "checkpoint_units")


def _names(text: str) -> tuple:
    out = tuple(x.strip() for x in text.split(","))
    if any(not x for x in out):
        raise argparse.ArgumentTypeError(f"{text!r}: an empty name in the comma-separated list")
    return out


def add_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("fine-tuning")
    g.add_argument("--freeze", type=_names, default=None, metavar="PREFIX[,PREFIX...]",
                   help="freeze the parameters of nodes whose name starts with a prefix (model.layers.0)")
    g.add_argument("--lora", dest="lora_r", type=int, default=None, metavar="R",
                   help="LoRA adapters of rank R (peft): the base model is frozen")
    g.add_argument("--lora-alpha", dest="lora_alpha", type=float, default=None, metavar="A",
                   help="LoRA alpha (scaling alpha/R; default 8, peft's)")
    g.add_argument("--lora-dropout", dest="lora_dropout", type=float, default=None, metavar="P")
    g.add_argument("--lora-targets", dest="lora_targets", type=_names, default=None, metavar="NAME[,NAME...]",
                   help="module-name suffixes to adapt (q_proj,v_proj); default: every Linear but the head")
    g.add_argument("--base-bits", dest="base_bits", type=int, choices=(4, 8), default=None,
                   help="QLoRA: bitsandbytes 4-bit NF4 / 8-bit storage of the frozen base weights")
    g.add_argument("--grad-accum", dest="grad_accum", type=int, default=None, metavar="K",
                   help="gradient accumulation: K micro-batches of --batch per optimizer step")
    g.add_argument("--checkpoint-layers", dest="checkpoint_layers", action="store_true", default=None,
                   help="checkpoint every repeated layer (<prefix>.<k>) as HF's gradient_checkpointing_enable()")
    g.add_argument("--checkpoint-units", dest="checkpoint_units", type=_names, default=None, metavar="LAYER[,LAYER...]",
                   help="checkpoint only these layers (selective; `memdesigner fit` plans the cheapest set)")
    g.add_argument("--master-weights", dest="master_weights", action="store_true", default=None,
                   help="with --dtype bf16/fp16: an fp32 master copy and fp32 optimizer state")


def settings_kw(args, base: dict) -> dict:
    """The fine-tuning settings: the command line's, else the design file's."""
    kw = {}
    for k in KEYS:
        v = getattr(args, k, None)
        if v is not None:
            kw[k] = v
        elif k in base:
            kw[k] = base[k]
    return kw


def describe(rep) -> list[str]:
    """The table's fine-tuning lines: peft's trainable-parameter line, where the adapters went."""
    ft = rep.finetune
    if ft is None:
        if rep.trainable_params is not None:
            return [f"  trainable       {rep.trainable_params:,} (the rest frozen)"] + describe_step(rep)
        return describe_step(rep)
    lines = [f"  {ft['summary']}"]
    if ft["adapters"]:
        shown = ", ".join(ft["adapters"][:6]) + (", ..." if len(ft["adapters"]) > 6 else "")
        lines.append(f"  LoRA r {ft['lora_r']} alpha {ft['lora_alpha']:g} on {len(ft['adapters'])} modules: {shown}")
    elif ft["lora_r"]:
        lines.append(f"  LoRA r {ft['lora_r']}: no module matched {ft['lora_targets']}")
    if ft["frozen_by_prefix"]:
        lines.append(f"  frozen by prefix {ft['frozen_by_prefix']} nodes")
    if ft["base_bits"]:
        kind = "NF4 + double quantisation (Linear4bit)" if ft["base_bits"] == 4 else "int8 (Linear8bitLt)"
        lines.append(f"  QLoRA base      {ft['quantised']} linear layers stored {kind}")
    return lines + describe_step(rep)


def describe_step(rep) -> list[str]:
    """Gradient accumulation's global batch and paged optimizer state (outside the peak)."""
    from memdesigner.units import format_bytes

    lines = []
    s = rep.settings
    if s.get("grad_accum", 1) > 1 and s["mode"] == "train":
        lines.append(f"  grad accum      {s['grad_accum']} micro-batches of {s['batch']}: global batch "
                     f"{s.get('global_batch')} (the peak is the last micro-step's)")
    if rep.paged_optimizer_bytes:
        lines.append(f"  paged state     {format_bytes(rep.paged_optimizer_bytes)} of optimizer state in unified "
                     f"memory (evicted to host RAM under pressure: not in the peak)")
    return lines
