"""The CLI's generate-mode lines: the cache, the steps, --max-context."""

from __future__ import annotations


def describe_generate(rep, fmt) -> list[str]:
    g = getattr(rep, "generate", None)
    if not g:
        return []
    lines = [f"generate          prompt {g['prompt']} + {g['new_tokens']} new tokens: prefill, then "
             f"{g['decode_steps']} decode steps; {g['kv_cache']} KV cache {fmt(g['kv_cache_bytes'])} at the end"]
    if g.get("max_context") is not None:
        lines.append(f"longest context   {g['max_context']:,} tokens (prompt + {g['new_tokens']} new)")
    return lines


def max_context(rep, design, settings, dev, error) -> None:
    """--max-context: the longest prompt + new tokens that fits (exact, a search of estimates)."""
    from memdesigner.engine.generate import longest_context

    if dev is None:
        raise error("--max-context needs --device")
    if settings.mode != "generate" or not getattr(rep, "generate", None):
        raise error("--max-context needs --mode generate")
    rep.generate["max_context"] = longest_context(design, settings, dev)
