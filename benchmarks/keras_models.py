"""Keras models, imported from their ``model.to_json()``, against Keras itself.

Eight small Keras 3 models written for this check (none is in the seed files). For each: the
parameter counts of ``model.summary()`` (total, trainable, non-trainable) against the imported
design, and peak memory (inference; training with SGD and Adam; fp32, batch 8) estimated against
the truth harness running the model on Keras 3's PyTorch backend on the CPU.

    python benchmarks/keras_models.py --export     # needs keras: write tests/fixtures/keras/*.json and
                                                   # the Keras facts (params, output shapes) next to them
    python benchmarks/keras_models.py --measure    # needs keras + shared/truth: tests/fixtures/keras/keras_measured.json
    python benchmarks/keras_models.py              # compare with the stored files (no keras needed)

Keras runs with ``KERAS_BACKEND=torch``: a Keras 3 model is then a ``torch.nn.Module``; a thin
wrapper passes ``training=`` (Keras layers do not read ``module.training``) and tells the harness
which models take token ids.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "torch")

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for p in (str(REPO), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

from _tables import OPTIMIZERS, default_truth_dir, mib  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures" / "keras"
FACTS = FIXTURES / "keras_facts.json"
TRUTH_JSON = FIXTURES / "keras_measured.json"
GRID = [("inference-b8", "inference", None, 8), ("train-sgd-b8", "train", "sgd", 8),
        ("train-adam-b8", "train", "adam", 8)]


# -- the models (built only with keras installed) --------------------------------------------------
def _models():
    import keras
    from keras import layers as L

    def audio_cnn():
        return keras.Sequential([
            keras.Input((99, 41, 1)), L.Conv2D(8, 3, activation="relu"), L.Conv2D(8, 3, activation="relu"),
            L.MaxPooling2D(2), L.Flatten(), L.Dense(32, activation="relu"), L.Dense(1, activation="sigmoid"),
        ], name="audio_cnn")

    def mlp_bn():
        return keras.Sequential([
            keras.Input((64,)), L.Dense(128), L.BatchNormalization(), L.Activation("relu"), L.Dropout(0.2),
            L.Dense(64), L.BatchNormalization(), L.Activation("relu"), L.Dense(10, activation="softmax"),
        ], name="mlp_bn")

    def lstm_classifier():
        return keras.Sequential([
            keras.Input((40,), dtype="int32"), L.Embedding(1000, 32), L.LSTM(48, return_sequences=True),
            L.Bidirectional(L.LSTM(16)), L.Dense(5, activation="softmax"),
        ], name="lstm_classifier")

    def gru_tagger():
        return keras.Sequential([
            keras.Input((30, 12)), L.GRU(32, return_sequences=True),
            L.GRU(24, return_sequences=True, reset_after=False), L.Bidirectional(L.GRU(16)), L.Dense(4),
        ], name="gru_tagger")

    def text_conv1d():
        return keras.Sequential([
            keras.Input((64,), dtype="int32"), L.Embedding(2000, 24), L.Conv1D(32, 5, activation="relu"),
            L.MaxPooling1D(2), L.Conv1D(16, 3, padding="same", activation="relu"), L.GlobalAveragePooling1D(),
            L.Dense(1, activation="sigmoid"),
        ], name="text_conv1d")

    def mobilenet_block():
        return keras.Sequential([
            keras.Input((32, 32, 3)), L.Conv2D(16, 3, strides=2, padding="same", use_bias=False),
            L.BatchNormalization(), L.ReLU(6.0), L.DepthwiseConv2D(3, padding="same", use_bias=False),
            L.BatchNormalization(), L.ReLU(6.0), L.Conv2D(24, 1, use_bias=False), L.BatchNormalization(),
            L.SeparableConv2D(32, 3, padding="same", activation="relu"),
            L.Conv2DTranspose(8, 3, strides=2, padding="same"), L.AveragePooling2D(2),
            L.GlobalAveragePooling2D(), L.Dense(10),
        ], name="mobilenet_block")

    def attention_block():
        x = keras.Input((16, 32), name="tokens")
        a = L.MultiHeadAttention(num_heads=4, key_dim=8, name="mha")(x, x)
        h = L.LayerNormalization(name="ln1")(L.Add(name="res1")([x, a]))
        f = L.Dense(64, activation="relu", name="ff1")(h)
        f = L.Dense(32, name="ff2")(f)
        h = L.LayerNormalization(name="ln2")(L.Add(name="res2")([h, f]))
        y = L.Dense(3, name="head")(L.GlobalAveragePooling1D(name="pool")(h))
        return keras.Model(x, y, name="attention_block")

    def functional_merge():
        x = keras.Input((24, 24, 3), name="image")
        a = L.Conv2D(8, 3, padding="same", activation="relu", name="conv_a")(x)
        b = L.Conv2D(8, 1, name="conv_b")(x)
        s = L.Add(name="add")([a, b])
        c = L.Concatenate(name="concat")([s, x])
        p = L.MaxPooling2D(2, name="pool")(c)
        r = L.Reshape((144, 11), name="reshape")(p)
        y = L.Flatten(name="flat")(L.Dropout(0.1, name="drop")(r))
        y = L.Activation("tanh", name="tanh")(L.Dense(16, name="fc")(y))
        return keras.Model(x, L.Dense(2, name="out")(y), name="functional_merge")

    return {f.__name__: f for f in (audio_cnn, mlp_bn, lstm_classifier, gru_tagger, text_conv1d,
                                    mobilenet_block, attention_block, functional_merge)}


def _input_info(model):
    shape = tuple(model.inputs[0].shape[1:])
    emb = next((lay for lay in model.layers if type(lay).__name__ == "Embedding"), None)
    return shape, (None if emb is None else int(emb.input_dim))


def _facts(model) -> dict:
    import numpy as np

    trainable = int(sum(np.prod(w.shape) for w in model.trainable_weights))
    non = int(sum(np.prod(w.shape) for w in model.non_trainable_weights))
    shapes = {lay.name: list(lay.output.shape[1:]) for lay in model.layers
              if not isinstance(lay.output, (list, tuple))}
    return {"total": int(model.count_params()), "trainable": trainable, "non_trainable": non,
            "output_shapes": shapes}


def export():
    FIXTURES.mkdir(parents=True, exist_ok=True)
    facts = {}
    for name, build in _models().items():
        m = build()
        (FIXTURES / f"{name}.json").write_text(json.dumps(json.loads(m.to_json()), indent=1) + "\n")
        facts[name] = _facts(m)
        print(f"{name}: {facts[name]['total']:,} params")
    FACTS.write_text(json.dumps(facts, indent=1) + "\n")


def _factory(build):
    import torch

    def make():
        km = build()
        shape, vocab = _input_info(km)

        class KerasOnTorch(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.km = km
                if vocab:
                    self.truth_input = ("tokens", vocab)

            def forward(self, x):
                return self.km(x, training=self.training)

        return KerasOnTorch(), shape
    return make


def measure_all(truth_dir: Path, only=None):
    if str(truth_dir) not in sys.path:
        sys.path.insert(0, str(truth_dir))
    from measure import measure

    truth = json.loads(TRUTH_JSON.read_text()) if TRUTH_JSON.exists() else {}
    for name, build in _models().items():
        if only and name not in only:
            continue
        for key, mode, opt, batch in GRID:
            rec = measure(_factory(build), batch=batch, mode=mode, optimizer=opt or "sgd", methods="a", name=name)
            a = rec["method_a"]
            truth[f"{name}/{key}"] = {"params": rec["params"], "peak": a["steady"]["peak"] if "peak" in a["steady"]
                                      else a["peak_overall"], "peak_overall": a["peak_overall"],
                                      "top": dict(list(a.get("peak_contents", {}).items())[:10])}
            print(name, key, truth[f"{name}/{key}"]["peak_overall"], flush=True)
            TRUTH_JSON.write_text(json.dumps(truth, indent=1, sort_keys=True) + "\n")


def compare():
    import memdesigner
    from memdesigner.importers.keras_json import load_keras_json

    facts = json.loads(FACTS.read_text())
    truth = json.loads(TRUTH_JSON.read_text()) if TRUTH_JSON.exists() else {}
    head = f"{'model':18} {'params design / Keras':>24} {'non-train':>10}"
    head += "".join(f" {k + ' est/meas MiB (err)':>34}" for k, *_ in GRID)
    print(head)
    errs = []
    for name, f in facts.items():
        d = load_keras_json(FIXTURES / f"{name}.json")
        cells = []
        rep = None
        for key, mode, opt, batch in GRID:
            rep = memdesigner.estimate(d, mode=mode, batch=batch, optimizer=OPTIMIZERS[opt], backend="cpu")
            t = truth.get(f"{name}/{key}")
            if t is None:
                cells.append(f"{mib(rep.peak_bytes)} / -")
                continue
            err = 100.0 * (rep.peak_bytes - t["peak_overall"]) / t["peak_overall"]
            errs.append(err)
            cells.append(f"{mib(rep.peak_bytes)} / {mib(t['peak_overall'])} ({err:+.1f}%)")
        p = f"{rep.total_params:,} / {f['total']:,}"
        print(f"{name:18} {p:>24} {rep.non_trainable_params:>10,}" + "".join(f" {c:>34}" for c in cells))
    if errs:
        abs_errs = sorted(abs(e) for e in errs)
        within = sum(e <= 1.0 for e in abs_errs)
        print(f"\n{len(errs)} configurations: median |error| {statistics.median(abs_errs):.2f} %, "
              f"worst {max(errs, key=abs):+.2f} %, within 1 %: {within}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--export", action="store_true", help="write the JSON fixtures and Keras facts (needs keras)")
    ap.add_argument("--measure", action="store_true", help="measure with the truth harness (needs keras)")
    ap.add_argument("--model", action="append", help="only these models (with --measure)")
    ap.add_argument("--truth-dir", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.export:
        export()
    if args.measure:
        measure_all(args.truth_dir or default_truth_dir(), args.model)
    compare()


if __name__ == "__main__":
    main()
