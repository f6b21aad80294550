"""Do the rule tests catch each memory rule? Applies 20 one-rule mutations, one at a time, to a
temporary copy of the package (never to this tree), runs the rule tests with ``-x -q`` and prints
which test killed each mutation and how long it took.

The *rule tests* are the unit and rule test files listed in RULE_TESTS: ``tests/engine/`` (the
timeline-exact tests) and the flat files that check one engine or layer rule by hand-derived or
measured numbers. Not the end-to-end corpora (zoo, holdout, examples, HF, Keras and ONNX models,
accuracy tables), nor the GUI, importer, exporter or CLI tests.

    python benchmarks/mutations.py              # every mutation (cached results are reused)
    python benchmarks/mutations.py --fresh      # ignore the cache
    python benchmarks/mutations.py -k fan_in    # only mutations whose name contains "fan_in"
    python benchmarks/mutations.py --tests tests/engine --cache /tmp/m.json   # other tests

Results are cached in benchmarks/mutations_results.json, keyed by a hash of the mutation's text,
of the file it patches and of the rule test files: a rerun after a change reruns only the
mutations whose file or tests changed.
Each run first tries the test that killed the mutation last time (the ``--lf`` idea), then the
whole set. A mutation whose old text is not found exactly once is reported as STALE (the code
moved: update the mutation), not as killed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "benchmarks" / "mutations_results.json"
RULE_TESTS = [
    "tests/engine",
    "tests/engine/test_engine_exact.py",
    "tests/engine/test_rules_guarded.py",
    "tests/model/test_layer_formulas.py",
    "tests/model/test_layer_rules_misc.py",
    "tests/importers/test_op_rules_measured.py",
    "tests/importers/test_concat_grad_sum.py",
    "tests/engine/test_live_set_inline.py",
    "tests/importers/test_frozen_params.py",
    "tests/engine/test_optimizer_step_label.py",
    "tests/engine/test_op_table.py",
    "tests/engine/test_engine_memos.py",
    "tests/engine/test_engine_caches.py",
    "tests/importers/test_amp_cross_entropy.py",
    "tests/engine/test_checkpoint_plan.py",
    "tests/importers/test_param_order.py",
    "tests/model/test_mha_memory.py",
    "tests/engine/test_gc_promote.py",
    "tests/importers/test_held_module_outputs.py",
]

BP = "memdesigner/engine/backward_pass.py"
PS = "memdesigner/engine/param_state.py"
OS_ = "memdesigner/engine/optimizer_step.py"
NORM = "memdesigner/model/layers/normalization.py"
ACT = "memdesigner/model/layers/activation.py"
LOSS = "memdesigner/model/layers/loss.py"
POOL = "memdesigner/model/layers/pooling.py"

# (name, file, exact old text, new text). The first 10 are the review's (issue 23).
MUTATIONS = [
    ("linear_saves_no_input", "memdesigner/model/layers/dense.py",
     "        if m.param_rg(0):\n            saved.append(x)", "        if m.param_rg(0):\n            pass"),
    ("conv_saves_no_input", "memdesigner/model/layers/conv.py",
     "saved = [In(0), Param(0)] if m.records else []", "saved = [Param(0)] if m.records else []"),
    ("layernorm_drops_mean_rstd", NORM,
     'saved=[In(0)] + stats, grad_in=["new"]))', 'saved=[In(0)], grad_in=["new"]))'),
    ("maxpool_indices_4_bytes", POOL,
     'idx = T(m.out_elems(0), "int64", "argmax indices")', 'idx = T(m.out_elems(0), "int32", "argmax indices")'),
    ("inplace_activation_no_clone", ACT,
     'saved = [T(n, dt, "clone of the input (in-place op needs the original)")]', "saved = [In(0)]"),
    ("cross_entropy_no_nll_gradient", LOSS,
     'bwd_stages=[([T(n, dt, "nll_loss gradient")], [], [1, 2])]', "bwd_stages=[([], [], [1, 2])]"),
    ("foreach_adam_temporary_0_bytes", OS_,
     't = mem.alloc(total, K, 1, "Adam step temporary', 't = mem.alloc(0, K, 1, "Adam step temporary'),
    ("fan_in_sum_zeroed_inlined", BP,
     "                    nb = view_nb or nbl[g]\n", "                    nb = 0\n"),
    ("adam_one_state_general_loop", PS,
     "                    state_total += state_per_param * sb + step_tensor\n"
     "                    state_r += state_per_param * (sb",
     "                    state_total += min(state_per_param, 1) * sb + step_tensor\n"
     "                    state_r += min(state_per_param, 1) * (sb"),
    ("fan_in_sum_removed_general", BP,
     '                summed = mem.alloc(view_nb or mem.nb[g], G, 1, "accumulated gradient")\n'
     '                mem.mark(("backward", nid))\n'
     "                mem.decref(old)\n"
     "                mem.decref(g)\n"
     "                grads[k] = summed\n",
     "                mem.decref(old)\n"
     "                grads[k] = g\n"),
    # -- ten more: rules that do not set the peak of the examples --------------------------------
    ("fan_in_sum_zeroed_fast_traced", BP,
     'summed = alloc(view_nb or mem.nb[g], G, 1, "accumulated gradient")',
     'summed = alloc(0, G, 1, "accumulated gradient")'),
    ("batchnorm_drops_mean_invstd", NORM,
     "    return OpMem(outputs=[out], out_dtypes=[out.dtype], saved=[In(0)] + stats,",
     "    return OpMem(outputs=[out], out_dtypes=[out.dtype], saved=[In(0)],"),
    ("activation_saves_no_output", ACT,
     '        if saves == "out" or (inplace and not inplace_clone):\n            saved = [Out(0)]',
     '        if saves == "out" or (inplace and not inplace_clone):\n            saved = []'),
    ("adam_loop_frees_denominator_at_once", OS_,
     "                prev = t2\n", "                mem.decref(t2)\n"),
    ("momentum_no_state_general_loop", PS,
     '"momentum": 1, "adam": 2, "adamw": 2}.get(opt, 0)\n    new_opt = opt in optim_state.NEW_OPTIMIZERS\n'
     "    master =",
     '"momentum": 0, "adam": 2, "adamw": 2}.get(opt, 0)\n    new_opt = opt in optim_state.NEW_OPTIMIZERS\n'
     "    master ="),
    ("mean_backward_gradient_0_bytes", BP,
     'grads[key] = mem.alloc(n * DTYPE_BYTES[val_spec[key][1]], G, 1, "MeanBackward0 gradient")',
     'grads[key] = mem.alloc(0, G, 1, "MeanBackward0 gradient")'),
    ("maxpool_inference_drops_indices", POOL,
     "temps=[idx] + copies", "temps=copies"),
    ("cross_entropy_drops_total_weight", LOSS,
     'scalars = [T(1, dt, "total_weight")]', "scalars = []"),
    ("lean_backward_keeps_saved", BP,
     "            else:\n                sv += g_out\n", "            else:\n                sv = list(g_out)\n"),
    ("amp_cast_cache_kept_after_forward", BP,
     "        for sid in cast_cache.values():\n            mem.decref(sid)\n",
     "        for sid in cast_cache.values():\n            pass\n"),
]


def _key(name: str, path: str, old: str, new: str, tests_hash: str) -> str:
    """The mutation's text, the file it patches (as it is now) and the rule tests."""
    code = (ROOT / path).read_text() if (ROOT / path).exists() else ""
    return hashlib.sha256(json.dumps([name, path, old, new, tests_hash, code]).encode()).hexdigest()[:16]


def _tests_hash() -> str:
    h = hashlib.sha256()
    for t in RULE_TESTS:
        p = ROOT / t
        for f in sorted(p.rglob("*.py")) if p.is_dir() else [p] if p.exists() else []:
            h.update(f.read_bytes())
    for f in ("tests/conftest.py", "tests/helpers.py"):
        h.update((ROOT / f).read_bytes())
    return h.hexdigest()[:16]


def _copy_tree(dst: Path) -> None:
    """The package, tests and benchmarks copied (so imports and ROOT-relative paths resolve
    inside the copy); the read-only resources linked."""
    ign = shutil.ignore_patterns("__pycache__", "*.pyc")
    for d in ("memdesigner", "tests", "benchmarks"):
        shutil.copytree(ROOT / d, dst / d, ignore=ign)
    shutil.copy2(ROOT / "pyproject.toml", dst / "pyproject.toml")
    for d in ("resources", "docs"):
        (dst / d).symlink_to(ROOT / d)


def _pytest(copy: Path, targets: list[str], timeout: int) -> tuple[int, str]:
    env = dict(os.environ, PYTHONPATH=str(copy), PYTHONDONTWRITEBYTECODE="1", QT_QPA_PLATFORM="offscreen")
    env.setdefault("MEMDESIGNER_TRUTH_DIR", str(ROOT.parent / "shared" / "truth"))
    if not Path(env["MEMDESIGNER_TRUTH_DIR"]).exists():
        env["MEMDESIGNER_TRUTH_DIR"] = "/work/shared/truth"
    targets = [t for t in targets if (copy / t.split("::")[0]).exists()]
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-rf", "--tb=no",
           "-o", "addopts=", *targets]
    try:
        p = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return -1, "timeout"
    return p.returncode, p.stdout + p.stderr


def _failed_test(out: str) -> str | None:
    for line in out.splitlines():
        if line.startswith("FAILED ") or line.startswith("ERROR "):
            return line.split()[1].split(" - ")[0]
    return None


def run_one(copy: Path, name: str, path: str, old: str, new: str, last_killer: str | None) -> dict:
    f = copy / path
    text = f.read_text()
    if text.count(old) != 1:
        return {"name": name, "killed_by": None, "status": f"STALE ({text.count(old)} matches)", "seconds": 0.0}
    t0 = time.perf_counter()
    f.write_text(text.replace(old, new))
    try:
        killer = None
        if last_killer:
            rc, out = _pytest(copy, [last_killer], 300)
            if rc == 1:
                killer = _failed_test(out) or last_killer
        if killer is None:
            rc, out = _pytest(copy, RULE_TESTS, 600)
            if rc == 1:
                killer = _failed_test(out)
            elif rc not in (0, 5):
                return {"name": name, "killed_by": None, "status": f"pytest rc {rc}: {out[-300:]}",
                        "seconds": round(time.perf_counter() - t0, 1)}
    finally:
        f.write_text(text)
    return {"name": name, "killed_by": killer, "status": "killed" if killer else "SURVIVED",
            "seconds": round(time.perf_counter() - t0, 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fresh", action="store_true", help="ignore cached results")
    ap.add_argument("-k", default="", help="only mutations whose name contains this")
    ap.add_argument("--cache", type=Path, default=CACHE)
    ap.add_argument("--tests", nargs="+", help="run these test paths instead of RULE_TESTS (a quick look)")
    a = ap.parse_args(argv)
    if a.tests:
        RULE_TESTS[:] = a.tests
    cache = {} if a.fresh or not a.cache.exists() else json.loads(a.cache.read_text())
    th = _tests_hash()
    rows = []
    with tempfile.TemporaryDirectory(prefix="md_mutants_") as tmp:
        copy = Path(tmp)
        _copy_tree(copy)
        rc, out = _pytest(copy, RULE_TESTS, 600) if a.fresh else (0, "")
        if rc != 0:
            print("the rule tests fail without any mutation:\n" + out[-2000:])
            return 2
        for name, path, old, new in MUTATIONS:
            if a.k not in name:
                continue
            key = _key(name, path, old, new, th)
            hit = cache.get(key)
            if hit is None:
                last = next((v.get("killed_by") for v in cache.values() if v.get("name") == name), None)
                hit = run_one(copy, name, path, old, new, last)
                if not hit["status"].startswith(("STALE", "pytest rc")):
                    cache[key] = hit
                    tmpf = a.cache.with_suffix(".json.tmp")
                    tmpf.write_text(json.dumps(cache, indent=1, sort_keys=True) + "\n")
                    os.replace(tmpf, a.cache)  # atomic: an interrupted run keeps what it had
            rows.append(hit)
            print(f"{hit['name']:40} {hit['status']:9} {hit['killed_by'] or '-'}  {hit['seconds']}s", flush=True)
    killed = sum(r["status"] == "killed" for r in rows)
    print("\n| # | mutation | killed by | s |\n|---|---|---|---:|")
    for i, r in enumerate(rows, 1):
        print(f"| {i} | {r['name']} | {r['killed_by'] or r['status']} | {r['seconds']} |")
    print(f"\n{killed} of {len(rows)} killed by the rule tests")
    return 0 if killed == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
