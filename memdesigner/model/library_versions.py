"""The library versions a design's graph follows, said in one line: what a PyTorch import ran
under (``{"torch": "2.14.1", "transformers": "4.57.6"}``) or the transformers major an HF config
was built for (``{"transformers": "5"}``). Memory differs between them (importers/hf_config/versions.py),
so the estimate names them."""

from __future__ import annotations

ORDER = ("torch", "transformers", "peft")


def describe(versions: dict) -> str:
    """``"torch 2.14.1, transformers 4.57.6"``; a bare major reads ``"transformers 5.x"``; "" for none."""
    names = [k for k in ORDER if k in versions] + sorted(k for k in versions if k not in ORDER)
    return ", ".join(f"{k} {v}.x" if str(v).isdigit() else f"{k} {v}" for k, v in
                     ((k, versions[k]) for k in names))
