"""Regenerate the layer-type table of docs/memory-model.md from the registrations.

    python tools/make_layer_docs.py
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memdesigner.model.layer_docs import BEGIN, END, layer_table  # noqa: E402

DOC = ROOT / "docs" / "memory-model.md"


def main() -> int:
    text = DOC.read_text()
    block = BEGIN + "\n" + layer_table() + END
    if BEGIN in text:
        text = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), lambda _m: block, text, flags=re.S)
    else:
        text = text.replace("### Keras 3 on the PyTorch backend", "### Every layer type (generated from the "
                            "registrations)\n\n" + block + "\n\n### Keras 3 on the PyTorch backend", 1)
    DOC.write_text(text)
    print(DOC)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
