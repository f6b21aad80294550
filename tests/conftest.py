import os
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "resources" / "examples"
TRUTH = Path(os.environ.get("MEMDESIGNER_TRUTH_DIR", ROOT.parent / "shared" / "truth"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
