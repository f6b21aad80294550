"""Regenerate the op table of docs/onnx-import.md from the layer registrations' ONNX column.

    python tools/make_onnx_docs.py
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memdesigner.importers.onnx_import import ops_table  # noqa: E402

DOC = ROOT / "docs" / "onnx-import.md"
BEGIN, END = "<!-- onnx-ops:begin -->", "<!-- onnx-ops:end -->"


def main() -> int:
    text = DOC.read_text()
    new = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), BEGIN + "\n" + ops_table() + END, text, flags=re.S)
    DOC.write_text(new)
    print(DOC)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
