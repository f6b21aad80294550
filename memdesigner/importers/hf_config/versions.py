"""Where the transformers major changes what a decoder's attention allocates, each difference a
rule with the versions it holds for (measured with ../shared/truth/measure.py on torch 2.14.1 CPU:
transformers 4.57.6 and 5.25.0, tests/importers/test_hf_transformers_major.py).

The builders model ``use_cache=False`` (training, a plain forward) with no ``attention_mask``:

- transformers 4.x (measured 4.57.6): the decoders pass ``position_ids`` and no cache, so
  ``masking_utils._preprocess_mask_arguments`` looks for packed sequences and
  ``create_causal_mask`` sets ``allow_is_causal_skip=False``: every layer type gets a
  materialised (batch, 1, T, T) bool mask, even where ``is_causal`` could stand for it.
- transformers 5.x: the mask is skipped (SDPA's ``is_causal``) unless a sliding window no longer
  than the sequence needs one.
- Gemma2's default attention: sdpa in 4.x (the soft-capping of the scores is skipped there), eager
  in 5.x (Gemma2 declares sdpa unsupported: soft-capping needs the scores).
- Both: with a mask, ``use_gqa_in_sdpa`` is False, so grouped-query keys and values go through
  ``repeat_kv`` (copies at the full head count, which SDPA's backward keeps); without one SDPA
  gets ``enable_gqa=True`` and the unrepeated tensors.
- MoE experts (Mixtral, Qwen2-MoE): 4.x keeps a ``ModuleList`` of expert MLPs looped over
  (each its own Linear weights and gradients); 5.x fuses them in 3-D weights run as grouped_mm.
"""

from __future__ import annotations

from memdesigner.importers.hf_config._graph import HfConfigError

MAJORS = (4, 5)
NEWEST = 5


def check_major(value) -> int:
    """The transformers major a design follows; HfConfigError names the setting otherwise."""
    if isinstance(value, bool) or value not in MAJORS:
        raise HfConfigError(f"transformers_major: {value!r} is not one of {', '.join(map(str, MAJORS))}")
    return int(value)


def default_attention(model_type: str, major: int) -> str:
    """transformers' attn_implementation when the config names none: "sdpa" or "eager"."""
    return "eager" if model_type == "gemma2" and major >= 5 else "sdpa"


def sdpa_mask_materialised(major: int, window, seq_len: int) -> bool:
    """Whether an SDPA layer gets a materialised bool mask (window: its sliding window or None)."""
    if major < 5:
        return True
    return bool(window) and seq_len >= window


def moe_experts_impl(major: int) -> str:
    """How a sparse MoE block runs its experts (model/layers/moe.py's ``impl``)."""
    return "modulelist" if major < 5 else "grouped_mm"
