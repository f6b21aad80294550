"""Fuzz the importers through the CLI: every bad input must give exactly one stderr line and exit 2
(a mutant that happens to be a valid model may import: exit 0, a loadable design at -o, and only
one-line warnings on stderr). Deterministic for a seed.

    python3 benchmarks/fuzz_importers.py [--keras 1000] [--torch 300] [--seed 12] [--show 10]

Keras cases mutate the Keras JSON fixtures (resources/fixtures) and a few small built-in models:
type swaps, deletions, huge/NaN numbers, deep nesting, non-UTF-8 bytes, truncation, unknown layer
classes, bad shapes, broken layer references. They run in this process through
``memdesigner.cli.main`` (no user code runs). Torch cases are .py files: syntax errors, wrong
factory names, factories returning non-modules, raising, exiting, looping, forwards that fail,
bad --input-shape strings; they run through ``main`` too, whose import runs each file in the
child process. Prints the totals per importer and family, and the first failures; exit 1 if any.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "resources" / "fixtures"


@dataclass
class Case:
    importer: str  # "keras" | "torch"
    family: str  # what kind of damage
    ident: str
    data: bytes  # the file
    spec_suffix: str = ""  # torch: ":FACTORY"
    args: list = field(default_factory=list)  # extra CLI arguments


@dataclass
class Outcome:
    case: Case
    rc: int
    stderr: str
    ok: bool
    why: str = ""


# -- Keras ----------------------------------------------------------------------------------------
def _seq(layers, shape):
    first = dict(layers[0])
    first["config"] = dict(first["config"], batch_input_shape=[None, *shape])
    return {"class_name": "Sequential", "config": {"name": "seq", "layers": [first, *layers[1:]]},
            "keras_version": "2.15.0", "backend": "tensorflow"}


def _L(cls, **cfg):  # noqa: N802
    return {"class_name": cls, "config": {"name": cfg.pop("name", cls.lower()), **cfg}}


BUILTIN_KERAS = {
    "rnn": _seq([_L("Embedding", input_dim=1000, output_dim=32), _L("LSTM", units=16, return_sequences=True),
                 _L("GRU", units=8), _L("Dense", units=3, activation="softmax")], [20]),
    "conv1d": _seq([_L("Conv1D", filters=8, kernel_size=3, padding="same", activation="relu"),
                    _L("MaxPooling1D", pool_size=2), _L("GlobalAveragePooling1D"), _L("Dropout", rate=0.5),
                    _L("Dense", units=1)], [64, 4]),
    "image": _seq([_L("Conv2D", filters=4, kernel_size=[3, 3], strides=[2, 2]), _L("BatchNormalization"),
                   _L("Activation", activation="elu"), _L("Reshape", target_shape=[7, 7, 4]),
                   _L("Permute", dims=[2, 1, 3]), _L("UpSampling2D", size=[2, 2]), _L("Flatten"),
                   _L("LayerNormalization"), _L("Dense", units=2)], [15, 15, 3]),
}


def keras_seeds() -> dict[str, object]:
    seeds = {p.name: json.loads(p.read_text()) for p in sorted(FIXTURES.glob("*.json"))}
    seeds.update({f"builtin:{k}": v for k, v in BUILTIN_KERAS.items()})
    return seeds


WEIRD = [None, True, False, 0, -1, 1, 2.5, -7.25, 10 ** 30, -(10 ** 30), 1e308, float("nan"), float("inf"),
         float("-inf"), "", "x", "relu", "same", [], [None], [0], [-3, 2], [1.5, "a"], {}, {"a": 1},
         {"class_name": "Dense"}, [[[]]], 2 ** 63, "\udcff", "\n\"'", "NaN"]
SHAPES = [[], [None], [None, 0], [None, -4, 3], [None, 3.5], [None, "a"], [None, None, 8], [None, 10 ** 12, 10 ** 12],
          [None, 10 ** 40], [None] + [2] * 30, [None, [3]], "3,3", 7, None, {}, [None, True]]


def _paths(obj, path=()):
    yield path
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*path, i))


def _get(obj, path):
    for p in path:
        obj = obj[p]
    return obj


def _set(obj, path, value):
    if not path:
        return value
    _get(obj, path[:-1])[path[-1]] = value
    return obj


def _layers(obj):
    cfg = obj.get("config") if isinstance(obj, dict) else None
    layers = cfg.get("layers") if isinstance(cfg, dict) else None
    return [lay for lay in layers if isinstance(lay, dict)] if isinstance(layers, list) else []


def _mutate_tree(rng: random.Random, obj, family: str):
    """One mutation; an earlier one may have left a shape this one cannot work on: then none."""
    try:
        return _mutate(rng, obj, family)
    except (AttributeError, TypeError, KeyError, IndexError):
        return obj


def _mutate(rng: random.Random, obj, family: str):
    paths = list(_paths(obj))
    if family == "type_swap":
        return _set(obj, rng.choice(paths), rng.choice(WEIRD))
    if family == "delete":
        path = rng.choice([p for p in paths if p]) if len(paths) > 1 else ()
        if not path:
            return {}
        parent = _get(obj, path[:-1])
        del parent[path[-1]]
        return obj
    if family == "numbers":
        nums = [p for p in paths if isinstance(_get(obj, p), (int, float)) and not isinstance(_get(obj, p), bool)]
        for p in rng.sample(nums, min(len(nums), rng.randint(1, 3))) if nums else []:
            _set(obj, p, rng.choice([10 ** 30, -(10 ** 18), 1e308, -1e308, float("nan"), float("inf"), 0, -1,
                                     2 ** 31, 2 ** 64, 1e-320, 0.5]))
        return obj
    if family == "unknown_class":
        layers = _layers(obj)
        if layers:
            rng.choice(layers)["class_name"] = rng.choice(["NoSuchLayer", "", "Lambda", "TFOpLambda", "Custom>X",
                                                          "Dense\n", "InputLayer", "Sequential", "Functional"])
        return obj
    if family == "bad_shape":
        layers = _layers(obj)
        if layers:
            lay = rng.choice(layers)
            cfg = lay.setdefault("config", {})
            if isinstance(cfg, dict):
                key = rng.choice(["batch_input_shape", "batch_shape", "target_shape", "kernel_size", "strides",
                                  "pool_size", "dims", "size", "units", "filters"])
                cfg[key] = rng.choice(SHAPES)
        return obj
    if family == "references":
        layers = _layers(obj)
        if layers:
            lay = rng.choice(layers)
            names = [str(x.get("name") or (x.get("config") or {}).get("name")) for x in layers]
            choice = rng.randrange(4)
            if choice == 0:
                lay["inbound_nodes"] = [[[rng.choice(["missing", *names]), rng.choice([0, 5, -1]), 9, {}]]]
            elif choice == 1:  # a layer fed by itself
                nm = str(lay.get("name"))
                lay["inbound_nodes"] = [[[nm, 0, 0, {}]]]
            elif choice == 2:  # duplicate names
                other = rng.choice(layers)
                lay["name"] = other.get("name")
                if isinstance(lay.get("config"), dict) and isinstance(other.get("config"), dict):
                    lay["config"]["name"] = other["config"].get("name")
            else:
                cfg = obj.get("config")
                if isinstance(cfg, dict):
                    cfg[rng.choice(["input_layers", "output_layers"])] = rng.choice(
                        [[["missing", 0, 0]], [], None, "x", [[names[0], 3, 3]], [[None]]])
        return obj
    raise AssertionError(family)


KERAS_FAMILIES = ["type_swap", "delete", "numbers", "unknown_class", "bad_shape", "references", "deep_nesting",
                  "non_utf8", "truncate", "combined"]


def keras_cases(n: int, seed: int) -> list[Case]:
    rng = random.Random(seed)
    seeds = keras_seeds()
    names = sorted(seeds)
    out = []
    for i in range(n):
        family = KERAS_FAMILIES[i % len(KERAS_FAMILIES)]
        src = rng.choice(names)
        obj = json.loads(json.dumps(seeds[src]))
        if family == "deep_nesting":
            depth = rng.choice([50, 2000, 100000])
            deep = "[" * depth + "1" + "]" * depth if rng.random() < 0.5 else '{"a":' * depth + "1" + "}" * depth
            text = json.dumps(obj)
            layers = _layers(obj)
            if layers and rng.random() < 0.6:
                lay = rng.choice(layers)
                lay.setdefault("config", {})
                if isinstance(lay["config"], dict):
                    lay["config"][rng.choice(["units", "batch_input_shape", "kernel_size", "activation", "x"])] = 0
                    text = json.dumps(obj).replace(": 0}", ": " + deep + "}", 1)
            else:
                text = deep
            data = text.encode()
        elif family == "non_utf8":
            raw = bytearray(json.dumps(obj).encode())
            for _ in range(rng.randint(1, 4)):
                pos = rng.randrange(len(raw))
                raw[pos:pos] = rng.choice([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\x80\x80", b"\xfe\xfe"])
            data = bytes(raw)
        elif family == "truncate":
            raw = json.dumps(obj).encode()
            data = raw[:rng.randrange(len(raw))]
        elif family == "combined":
            for _ in range(rng.randint(2, 4)):
                obj = _mutate_tree(rng, obj, rng.choice(KERAS_FAMILIES[:6]))
            data = json.dumps(obj).encode()
        else:
            obj = _mutate_tree(rng, obj, family)
            data = json.dumps(obj).encode()
        out.append(Case("keras", family, f"k{i:04d}-{src}", data))
    return out


# -- torch ----------------------------------------------------------------------------------------
GOOD = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 8 * 8, 5)

    def forward(self, x):
        x = F.relu(self.conv(x))
        return self.fc(torch.flatten(x, 1))


def make():
    return Net(), (3, 8, 8)
'''

RETURNS = ["42", "None", "'a string'", "(Net(),)", "(Net(), 'abc')", "(Net(), (-1, 8, 8))", "(Net(), (0,))",
           "(Net(), None)", "[Net(), (3, 8, 8)]", "Net", "(Net(), (3, 8))", "(Net(), (3, 8, 8, 8))",
           "(Net(), (10**12, 8, 8))", "(Net(), ('3', 8, 8))", "(Net(), 3)", "nn.Linear", "(nn.Linear(4, 2), (5,))",
           "(nn.Identity(), (4,))", "(nn.Sequential(), (4,))", "(nn.ReLU(), (2.5,))", "object()", "(Net(), (3.5, 8, 8))",
           "(nn.Linear(4, 2), (float('nan'),))", "(nn.Linear(4, 2), (True,))", "(Net(), [3, 8, 8])"]
RAISES = ["raise RuntimeError('boom')", "raise ValueError('two\\nlines')", "raise KeyboardInterrupt",
          "raise SystemExit(0)", "raise SystemExit('a message')", "raise SystemExit(None)", "import os; os._exit(5)",
          "import os; os._exit(0)", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)",
          "raise RecursionError('deep')", "raise MemoryError()", "1 / 0", "import no_such_module_xyz",
          "class E(Exception):\n        def __str__(self):\n            raise TypeError('no str')\n    raise E()",
          "raise Exception('x' * 100000)", "raise GeneratorExit", "import sys; sys.exit(3)",
          "import os; os.chdir('/'); return make()", "print('noise' * 1000); return make()",
          "import sys; sys.stdout.close(); return make()", "import sys; sys.stderr.write('e\\n' * 50); return make()",
          "input()", "import sys; sys.setrecursionlimit(30); return make()"]
FORWARDS = ["return x.view(-1, 7)", "raise RuntimeError('forward failed')", "return None", "return 3",
            "return {'a': x}", "return x @ x", "if x.sum() > 0:\n            return x\n        return -x",
            "return self.missing(x)", "return x.item()", "return [x, x]", "import sys; sys.exit(0)",
            "return torch.nonzero(x)", "return x.numpy()", "return x[x > 0]", "return x.reshape(x.shape[0], -1) @ "
            "torch.ones(5, 5)", "while True:\n            pass"]
BAD_SHAPES = ["", "a", "-1", "0", "3,,", "1e3", "3.5", "99999999999999999999999", "3 224 224", ",".join(["2"] * 9),
              "1x2x", "3;4", "٣,٤", "nan", "0x8", "3,-8,8", "\x00", "3,8,8\n", "+3,8,8", "   "]


def _syntax_error(rng: random.Random) -> str:
    src = GOOD
    k = rng.randrange(4)
    if k == 0:
        return src[:rng.randrange(len(src))]
    if k == 1:
        pos = rng.randrange(len(src))
        return src[:pos] + rng.choice(["(", ")", ":", "\t", "def", "'''", "\\", "@", "\x00", "é="]) + src[pos:]
    if k == 2:
        return src.replace("    ", "  ", 1)
    return "\xff\xfe" + src


TORCH_FAMILIES = ["syntax", "factory_name", "returns", "raises", "forward", "input_shape", "module_body", "loop"]


def torch_cases(n: int, seed: int) -> list[Case]:
    rng = random.Random(seed + 1)
    out = []
    for i in range(n):
        family = TORCH_FAMILIES[i % len(TORCH_FAMILIES)]
        args: list = []
        suffix = ":make"
        if family == "syntax":
            text = _syntax_error(rng)
        elif family == "factory_name":
            text = GOOD
            suffix = ":" + rng.choice(["nope", "", "Net.forward", "make()", "torch", "F", "__name__", "nn", "123",
                                       "make:make", "GOOD", "Net"])
        elif family == "returns":
            text = GOOD + f"\n\ndef bad():\n    return {rng.choice(RETURNS)}\n"
            suffix = ":bad"
        elif family == "raises":
            text = GOOD + f"\n\ndef bad():\n    {rng.choice(RAISES)}\n"
            suffix = ":bad"
        elif family == "forward":
            body = rng.choice(FORWARDS)
            text = GOOD + f"\n\nclass Bad(nn.Module):\n    def __init__(self):\n        super().__init__()\n" \
                          f"        self.fc = nn.Linear(4, 5)\n\n    def forward(self, x):\n        {body}\n\n\n" \
                          f"def bad():\n    return Bad(), (4,)\n"
            suffix = ":bad"
        elif family == "input_shape":
            text = GOOD
            args = [f"--input-shape={rng.choice(BAD_SHAPES)}"]
            if rng.random() < 0.3:
                args.append(f"--input-dtype={rng.choice(['int64', 'float'])}")
        elif family == "module_body":
            text = rng.choice(["import sys\nsys.exit(0)\n", "import os\nos._exit(1)\n", "raise ImportError('x')\n",
                               "import os\nos.chdir('/')\n", "print('x')\n", "x = 1\n", "", "import torch\n"
                               "torch.set_default_device('meta')\n", "import nonexistent_pkg\n"]) + GOOD
            if rng.random() < 0.5:
                suffix = ""
        else:  # loop: needs the time limit
            text = GOOD + "\n\ndef bad():\n    while True:\n        pass\n"
            suffix = ":bad"
            args = ["--timeout", "1"]
        out.append(Case("torch", family, f"t{i:04d}", text.encode("utf-8", "surrogatepass"), suffix, args))
    return out


# -- running --------------------------------------------------------------------------------------
def run_case(case: Case, workdir: Path) -> Outcome:
    from memdesigner.cli import main
    from memdesigner.io.design_file import DesignFileError, load_design

    src = workdir / (f"{case.ident}.json" if case.importer == "keras" else f"{case.ident}.py")
    src.write_bytes(case.data)
    out = workdir / f"{case.ident}.out.json"
    argv = ["import", case.importer, str(src) + case.spec_suffix, "-o", str(out), *case.args]
    if case.importer == "torch" and "--timeout" not in case.args:
        argv += ["--timeout", "60"]
    err, sink = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(sink):
            rc = main(argv)
    except SystemExit as e:  # argparse's own errors (one line, exit 2)
        rc = e.code if isinstance(e.code, int) else 1
    except BaseException as e:  # noqa: BLE001 - what the fuzzer is looking for
        return Outcome(case, -1, err.getvalue(), False, f"raised {type(e).__name__}: {str(e)[:200]}")
    text = err.getvalue()
    lines = text.splitlines()
    if rc == 2:
        if len(lines) != 1 or not lines[0].startswith("memdesigner: error: "):
            return Outcome(case, rc, text, False, f"{len(lines)} stderr lines")
        if out.exists():
            return Outcome(case, rc, text, False, "exit 2 but the output file was written")
        return Outcome(case, rc, text, True)
    if rc == 0:
        if any(not ln.startswith("memdesigner: warning: ") for ln in lines):
            return Outcome(case, rc, text, False, "exit 0 with stderr lines that are not one-line warnings")
        try:
            load_design(out)
        except DesignFileError as e:
            return Outcome(case, rc, text, False, f"exit 0 but the design does not load: {e}")
        return Outcome(case, rc, text, True)
    return Outcome(case, rc, text, False, f"exit code {rc}")


def run(cases: list[Case]) -> list[Outcome]:
    with tempfile.TemporaryDirectory(prefix="memdesigner-fuzz-") as tmp:
        return [run_case(c, Path(tmp)) for c in cases]


def summary(outcomes: list[Outcome]) -> str:
    rows: dict = {}
    for o in outcomes:
        r = rows.setdefault((o.case.importer, o.case.family), [0, 0, 0, 0])
        r[0] += 1
        r[1] += o.rc == 2 and o.ok
        r[2] += o.rc == 0 and o.ok
        r[3] += not o.ok
    lines = [f"| {'importer':<8} | {'family':<14} | {'cases':>5} | {'exit 2':>6} | {'exit 0':>6} | {'failures':>8} |",
             f"|{'-' * 10}|{'-' * 16}|{'-' * 6}:|{'-' * 7}:|{'-' * 7}:|{'-' * 9}:|"]
    tot = [0, 0, 0, 0]
    for (imp, fam), r in sorted(rows.items()):
        lines.append(f"| {imp:<8} | {fam:<14} | {r[0]:>5} | {r[1]:>6} | {r[2]:>6} | {r[3]:>8} |")
        tot = [a + b for a, b in zip(tot, r)]
    lines.append(f"| {'total':<8} | {'':<14} | {tot[0]:>5} | {tot[1]:>6} | {tot[2]:>6} | {tot[3]:>8} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keras", type=int, default=1000, help="Keras cases")
    ap.add_argument("--torch", type=int, default=300, help="PyTorch cases (each runs a child process)")
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--show", type=int, default=10, help="failures to print")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    outcomes = run(keras_cases(a.keras, a.seed))
    t1 = time.perf_counter()
    outcomes += run(torch_cases(a.torch, a.seed))
    t2 = time.perf_counter()
    print(summary(outcomes))
    print(f"\nkeras {t1 - t0:.1f} s, torch {t2 - t1:.1f} s (seed {a.seed})")
    bad = [o for o in outcomes if not o.ok]
    for o in bad[:a.show]:
        print(f"\nFAIL {o.case.ident} {o.case.family} {o.case.spec_suffix} {o.case.args}: {o.why}\n"
              f"{o.stderr[-1500:]}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
