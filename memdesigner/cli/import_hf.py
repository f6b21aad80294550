"""`memdesigner import hf CONFIG.json -o DESIGN.json [--seq-len N] [--task ...]`."""

from __future__ import annotations

from memdesigner.importers.hf_config import MAJORS, NEWEST, TASKS, HfConfigError, import_file


def add_parser(isub, parser_class) -> None:
    p = isub.add_parser("hf", help="a Hugging Face config.json (llama, mistral, qwen2, gemma, gemma2, phi3; no weights)",
                        description="Builds the design of the model transformers would instantiate from the "
                                    "config, without transformers or weights.")
    p.add_argument("config", help="CONFIG.json")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--seq-len", type=int, default=512, help="tokens per sample (default 512)")
    p.add_argument("--task", choices=TASKS, default="causal-lm",
                   help="causal-lm: lm_head logits; classification: a score head on the last token; base: hidden states")
    p.add_argument("--transformers", type=int, choices=MAJORS, default=NEWEST, dest="transformers_major",
                   help=f"the transformers major the model runs under (default {NEWEST}): 4.x materialises a causal "
                        "mask in every layer and repeats grouped-query keys/values; 5.x lets SDPA be causal")


def design_for_cli(args):
    """The design, or ValueError with one line naming the file or field."""
    try:
        return import_file(args.config, seq_len=args.seq_len, task=args.task,
                           transformers_major=getattr(args, "transformers_major", NEWEST))
    except HfConfigError as err:
        raise ValueError(str(err)) from None
