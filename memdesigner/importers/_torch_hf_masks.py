"""transformers 5.x's attention masks while the importer traces: under torch.export
masking_utils takes its export path -- ``is_torchdynamo_exporting()`` keeps the causal mask, and
``find_packed_sequence_indices`` cannot check its (data-dependent) result, so it returns the
packed-sequence mask -- and every layer got a materialised (B, 1, T, T) bool mask and
repeat_kv copies of grouped-query keys and values that the eager step does not make (SDPA's
is_causal with enable_gqa): +4 % in SGD on a small Llama.

The import feeds the model its first input only (token ids), so the decoder makes its own
position ids (an arange: never packed) and no attention mask: eager's answers are "not packed"
and "not exporting", and the trace is given those. transformers 4.x keeps its own behaviour: its
eager forward materialises the mask too (hf_config/versions.py)."""

from __future__ import annotations

import contextlib
import sys


def _major(module) -> int:
    try:
        return int(str(getattr(module, "__version__", "0")).split(".")[0])
    except ValueError:
        return 0


@contextlib.contextmanager
def eager_hf_masks():
    tf = sys.modules.get("transformers")
    mu = sys.modules.get("transformers.masking_utils")
    if tf is None or mu is None or _major(tf) < 5 or not hasattr(mu, "find_packed_sequence_indices") \
            or not hasattr(mu, "is_torchdynamo_exporting"):
        yield
        return
    packed, exporting = mu.find_packed_sequence_indices, mu.is_torchdynamo_exporting
    mu.find_packed_sequence_indices = lambda position_ids: None
    mu.is_torchdynamo_exporting = lambda: False
    try:
        yield
    finally:
        mu.find_packed_sequence_indices, mu.is_torchdynamo_exporting = packed, exporting
