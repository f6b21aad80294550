"""Issue 22, a real full disk: each command that writes a file runs (as a subprocess) with its
output on a 64 KiB tmpfs that already holds the old output and is otherwise filled to the last
page. The old file must come out byte-identical, stderr must be one line, the exit code 2 (or 1)
and no temporary file may be left. Needs root (mount); prints "skipped" and exits 0 elsewhere.

    sudo python benchmarks/full_disk.py [--code DIR]   # DIR: the memdesigner tree to test (default: this one)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "resources" / "examples"
LENET = str(EXAMPLES / "lenet5.json")
OLD = b"the old output, which a failed write must leave exactly as it was\n" * 40  # 2,640 B
ENTRY = "import sys; from memdesigner.cli import main; sys.exit(main())"  # what the memdesigner script runs
TORCH_MODEL = "import torch\n\ndef make():\n    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())\n"


def _onnx_file(folder: Path) -> str:
    import onnx
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])])
    path = folder / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def commands(inputs: Path) -> dict:
    (inputs / "model.py").write_text(TORCH_MODEL)
    keras = str(ROOT / "resources" / "fixtures" / "functional_small.keras2.json")
    return {
        "report html": (["report", LENET, "--no-graph", "--no-max-batch"], "r.html"),
        "report md": (["report", LENET, "--no-graph", "--no-max-batch"], "r.md"),
        "export torch": (["export", "torch", LENET], "m.py"),
        "export snapshot": (["export", "snapshot", LENET], "s.pickle"),
        "render": (["render", LENET], "w.png"),
        "import keras": (["import", "keras", keras], "d.json"),
        "import hf": (["import", "hf", str(EXAMPLES / "hf" / "bert-base-uncased.json"), "--seq-len", "16"], "d.json"),
        "import onnx": (["import", "onnx", _onnx_file(inputs)], "d.json"),
        "import torch": (["import", "torch", f"{inputs / 'model.py'}:make", "--input-shape", "4"], "d.json"),
    }


def _fill(folder: Path) -> None:
    """Fill the file system to its last byte (tmpfs: its last page)."""
    with open(folder / ".filler", "wb", buffering=0) as f:
        for size in (1 << 16, 4096, 512, 1):
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError:
                pass


def _clear(folder: Path) -> None:
    for p in folder.iterdir():
        p.unlink()


def run_one(mnt: Path, argv: list, name: str, code: Path) -> dict:
    _clear(mnt)
    out = mnt / name
    out.write_bytes(OLD)
    _fill(mnt)
    env = dict(os.environ, PYTHONPATH=str(code), QT_QPA_PLATFORM="offscreen")
    r = subprocess.run([sys.executable, "-c", ENTRY, *argv, "-o", str(out)], env=env,
                       capture_output=True, text=True, timeout=300, cwd=str(mnt.parent))
    left = sorted(p.name for p in mnt.iterdir() if p.name not in (name, ".filler"))
    lines = r.stderr.strip().splitlines()
    return {"rc": r.returncode, "lines": len(lines), "first": lines[0] if lines else "",
            "traceback": "Traceback" in r.stderr, "intact": out.exists() and out.read_bytes() == OLD,
            "size": out.stat().st_size if out.exists() else -1, "left": left}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--code", default=str(ROOT), help="the tree whose memdesigner package runs")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="memdesigner-full-disk-") as tmp:
        tmp = Path(tmp)
        mnt = tmp / "disk"
        mnt.mkdir()
        inputs = tmp / "inputs"
        inputs.mkdir()
        m = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True,
                           text=True)
        if m.returncode != 0:
            print(f"skipped: cannot mount a tmpfs here ({m.stderr.strip() or m.returncode})")
            return 0
        failures = 0
        try:
            print(f"code: {args.code}; old output {len(OLD):,} B on a full 64 KiB tmpfs")
            print(f"{'command':<16} {'exit':>4} {'stderr lines':>12} {'traceback':>9} {'old file':>15}  left behind / message")
            for label, spec in commands(inputs).items():
                r = run_one(mnt, spec[0], spec[1], Path(args.code))
                ok = r["rc"] in (1, 2) and r["lines"] == 1 and not r["traceback"] and r["intact"] and not r["left"]
                failures += not ok
                old = "byte-identical" if r["intact"] else f"now {r['size']:,} B"
                print(f"{label:<16} {r['rc']:>4} {r['lines']:>12} {'yes' if r['traceback'] else 'no':>9} {old:>15}  "
                      f"{', '.join(r['left']) or r['first'][:110]}")
        finally:
            subprocess.run(["umount", str(mnt)], check=False)
    print("all kept the old file, one line, no traceback" if not failures else f"{failures} command(s) FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
