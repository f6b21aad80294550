"""Check an imported design against PyTorch itself, in the import's child: run one step of the
user's own module under the storage tracker (_torch_step), estimate the design at the same
settings, and keep both in ``design.verified`` (engine/verified.py words the verdict).

The import built the module on meta; here its parameters and buffers become FakeTensors on the
CPU (no memory, no initialisation), so the check costs one fake step (ResNet-50 inference at
batch 1: ~0.3 s). Where that fails, the factory is run again under FakeTensorMode, then (a small
model only) for real on the CPU; if all fail, or the time budget runs out, the design says why it
was not checked. Training is checked too when it is cheap (its predicted time, from the
inference check's, is under CHEAP_TRAIN_S)."""

from __future__ import annotations

import contextlib
import signal
import threading
import time

VERSION = 1
BUDGET_S = 30.0  # the most one import spends checking: a timer in the child stops the step
CHEAP_TRAIN_S = 1.0  # the train check runs when TRAIN_COST x the inference check's time is below this
TRAIN_COST = 5.0  # a train step (forward, backward, Adam's for-loop) costs about this many inferences
REAL_RUN_MAX_BYTES = 1 << 30  # a real CPU run only where a train step's weights, grads and state fit
DIFFERS_TOP = 3  # layers named where the estimate departs from the measurement
OPS_TOP = 3  # aten ops named per such layer
MIN_DIFF_BYTES = 4096  # a departure smaller than this names no layer
SCOPED = ("forward", "backward")  # the phases whose ops run inside the model's modules


class _OutOfTime(BaseException):
    """(Not an Exception: the model's own ``except Exception`` must not swallow the time limit.)"""


def default_settings(mode: str):
    from memdesigner.engine.settings import Settings

    return Settings(mode=mode, batch=1, backend="cpu")


def settings_dict(s) -> dict:
    """The check's settings as stored: mode, batch, backend, dtype (and the optimizer in training),
    plus every other field away from its default (a what-if the check ran under)."""
    from dataclasses import asdict

    from memdesigner.engine.settings import Settings

    base = asdict(Settings())
    out = {k: v for k, v in asdict(s).items()
           if k in ("mode", "batch", "backend", "dtype") or (k == "optimizer" and s.mode == "train") or
           (v != base[k] and not (k == "optimizer" and s.mode != "train"))}
    return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}


def check_design(torch, design, module, input_shape, rebuild=None, budget_s: float = BUDGET_S,
                 at=None) -> dict:
    """``design.verified`` for a design imported from ``module`` (built on meta, or real).
    ``rebuild``: () -> a fresh module (the factory, run again) for the fallbacks. ``at``: the
    Settings to check at (the import was asked for them); None: batch 1 inference, and training
    (Adam) when that is cheap."""
    from memdesigner.importers._torch_versions import versions_ran_under

    start = time.monotonic()
    out = {"version": VERSION, "against": f"PyTorch {versions_ran_under(torch)['torch']} on CPU",
           "versions": versions_ran_under(torch), "checks": []}
    try:
        with _time_limit(budget_s):
            asked = list(at or ())
            first_s = asked[0] if asked else default_settings("inference")
            t0 = time.monotonic()
            runner, how, first = _runner(torch, design, module, input_shape, rebuild, first_s)
            out["run"] = how
            took = time.monotonic() - t0
            out["checks"].append(_one(design, runner, first_s, first))
            for s in asked[1:]:
                out["checks"].append(_one(design, runner, s))
            if not asked:  # the defaults: training too, when it is cheap
                if TRAIN_COST * took <= CHEAP_TRAIN_S:
                    out["checks"].append(_one(design, runner, default_settings("train")))
                else:
                    out["note"] = (f"training not checked: the inference check took {took:.2f} s, a train step "
                                   f"would take about {TRAIN_COST * took:.1f} s")
    except _OutOfTime:
        out["skipped" if not out["checks"] else "note"] = f"the check ran past its {budget_s:g} s budget"
    except _CheckFailed as err:
        out["skipped"] = str(err)
    except Exception as err:  # noqa: BLE001 - a check that fails must never fail the import that worked
        why = f"the check failed: {type(err).__name__}: {_first_line(err)}"
        out["skipped" if not out["checks"] else "note"] = why
    out["seconds"] = round(time.monotonic() - start, 3)
    return out


class _CheckFailed(Exception):
    pass


def _runner(torch, design, module, input_shape, rebuild, first_s):
    """(settings -> tracker result, how it ran, the result at ``first_s``): the first way of
    running one step that works."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from memdesigner.importers._torch_step import builtin_measure

    tokens = _token_input(design)

    def make(build, fake):
        fm = FakeTensorMode(allow_non_fake_inputs=False) if fake else None
        built: list = []

        def run(s):
            scopes = ModuleScopes()

            def factory():
                if not built:
                    built.append(build(fm))
                m = built[0]
                if tokens:
                    m.truth_input = ("tokens", tokens)
                scopes.install(m)
                return m, tuple(input_shape)

            try:
                with fm if fm is not None else contextlib.nullcontext():
                    return builtin_measure(factory, s, "cpu", _opt(s), 2, 0, scopes)
            finally:
                scopes.remove()
        return run

    ways = [(lambda fm: _faked(torch, module, fm), True, "fake tensors")]
    if rebuild is not None:
        ways.append((lambda fm: rebuild(), True, "fake tensors (the factory run again)"))
        if _small(design):
            ways.append((lambda fm: rebuild(), False, "a real CPU run"))
    tried = []
    for build, fake, how in ways:
        run = make(build, fake)
        try:
            return run, how, run(first_s)
        except _OutOfTime:
            raise
        except Exception as err:  # noqa: BLE001 - the model's code can raise anything; try the next way
            tried.append(f"{how}: {type(err).__name__}: {_first_line(err)}")
    raise _CheckFailed("not checked against PyTorch: " + "; ".join(tried))


def _one(design, runner, s, res=None) -> dict:
    from memdesigner.engine.estimate import estimate

    res = res if res is not None else runner(s)
    rep = estimate(design, s)
    measured, est = int(res["peak_bytes"]), int(rep.peak_bytes)
    timeline = _compress(res)
    return {"settings": settings_dict(s), "measured_peak": measured,
            "measured_phases": {k: int(v) for k, v in res["phase_peaks"].items()},
            "estimate_peak": est, "estimate_phases": {k: int(v) for k, v in rep.phase_peaks.items() if v},
            "diff_pct": round(100.0 * (est - measured) / measured, 3) if measured else 0.0,
            "differs": differs(timeline, rep.timeline, _ops_by_layer(res), _differing_phases(res, rep)),
            "timeline": timeline}


def _differing_phases(res, rep) -> set:
    return {ph for ph, m in res["phase_peaks"].items() if abs(int(rep.phase_peaks.get(ph, 0)) - int(m)) >= MIN_DIFF_BYTES}


def _compress(res) -> list:
    """The measured steady step as [phase, layer, peak bytes] per run of ops in one layer."""
    out: list = []
    layers = res.get("timeline_layers") or [None] * len(res["timeline"])
    for cur, ph, lay in zip(res["timeline"], res["timeline_phases"], layers):
        if ph is None:
            continue
        if ph not in SCOPED:  # (the optimizer's ops run in no module: the last backward tag is stale)
            lay = None
        if out and out[-1][0] == ph and out[-1][1] == lay:
            out[-1][2] = max(out[-1][2], int(cur))
        else:
            out.append([ph, lay, int(cur)])
    return out


def _ops_by_layer(res) -> dict:
    """layer -> {aten op: bytes its outputs added}, forward and backward."""
    out: dict = {}
    prev = None
    layers = res.get("timeline_layers") or [None] * len(res["timeline"])
    for cur, ph, lay, op in zip(res["timeline"], res["timeline_phases"], layers, res.get("timeline_ops") or ()):
        if prev is not None and cur > prev and lay is not None and ph in SCOPED:
            name = op.removeprefix("aten.").removesuffix(".default")
            d = out.setdefault(lay, {})
            d[name] = d.get(name, 0) + cur - prev
        prev = cur
    return out


def differs(measured_tl, events, ops_by_layer, phases=None) -> list:
    """The layers where the estimate departs from the measurement: walking each phase in the
    order it ran, the estimate's running peak minus the measured one after each layer; a layer's
    departure is how much that difference changes there (an error carries into every later layer:
    the one that starts it is named). Only phases whose peaks differ (``phases``: the phase names,
    None: all) are walked. Largest first: {"layer", "phase", "bytes", "ops"}."""
    keys = {lay for _, lay, _ in measured_tl if lay is not None}
    est: dict = {}
    for e in events:
        lay = _key(e.label or "", keys)
        if lay is not None:
            est[(e.phase, lay)] = max(est.get((e.phase, lay), 0), int(e.bytes))
    out, run_m, run_e, prev = [], {}, {}, {}
    for ph, lay, b in measured_tl:
        if phases is not None and ph not in phases:
            continue
        run_m[ph] = max(run_m.get(ph, 0), b)
        if lay is None or (ph, lay) not in est:
            continue
        run_e[ph] = max(run_e.get(ph, 0), est.pop((ph, lay)))
        d = run_e[ph] - run_m[ph]
        jump = d - prev.get(ph, 0)
        prev[ph] = d
        if abs(jump) >= MIN_DIFF_BYTES:
            ops = sorted(ops_by_layer.get(lay, {}).items(), key=lambda kv: -kv[1])[:OPS_TOP]
            out.append({"layer": lay, "phase": ph, "bytes": int(jump), "ops": [k for k, _ in ops]})
    out.sort(key=lambda r: -abs(r["bytes"]))
    return out[:DIFFERS_TOP]


def _key(label: str, keys: set) -> str | None:
    """The measured module a design layer's label belongs to: the label itself, or the longest
    module path it lies under ("layer1.0.add" -> "layer1.0")."""
    cand = label
    while cand:
        if cand in keys:
            return cand
        cand = cand.rpartition(".")[0]
    return None


class ModuleScopes:
    """Which module of the user's model a moment of the step is in, as its qualified name:
    forward pre/post hooks on every module keep a stack; the hook on the autograd node that made a
    module's output names it when its backward starts (as measure/layer_tags.py does)."""

    def __init__(self):
        self.stack: list = []
        self.backward = None
        self.handles: list = []

    def install(self, model) -> None:
        from functools import partial

        for name, mod in model.named_modules():
            if not name:
                continue
            self.handles.append(mod.register_forward_pre_hook(partial(self._enter, name)))
            self.handles.append(mod.register_forward_hook(partial(self._leave, name)))

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles.clear()

    def tag(self):
        return self.stack[-1] if self.stack else self.backward

    def _enter(self, name, _mod, _args):
        self.stack.append(name)
        self.backward = None

    def _leave(self, name, _mod, _args, out):
        if self.stack and self.stack[-1] == name:
            self.stack.pop()
        from functools import partial

        from torch.utils._pytree import tree_leaves

        for t in tree_leaves(out):
            fn = getattr(t, "grad_fn", None)
            if fn is not None:
                fn.register_prehook(partial(self._in_backward, name))
                break

    def _in_backward(self, name, _grads):
        self.backward = name


def _faked(torch, module, fm):
    """``module`` with every parameter and buffer a CPU FakeTensor of the same shape, dtype and
    grad flag (a tied parameter stays one); meta tensors are wrapped without running anything."""
    from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily

    with unset_fake_temporarily():  # (called inside the fake mode: the originals are real tensors)
        return _faked_now(torch, module, fm, FakeTensor)


def _faked_now(torch, module, fm, FakeTensor):
    cpu = torch.device("cpu")
    memo: dict = {}  # id -> (original, fake): the original is held so that its id stays its own

    def fake(t, param):
        hit = memo.get(id(t))
        if hit is None:
            base = t.detach()
            f = FakeTensor(fm, base, cpu) if base.device.type == "meta" else fm.from_tensor(base)
            if param:
                f = torch.nn.Parameter(f, requires_grad=t.requires_grad)
            hit = memo[id(t)] = (t, f)
        return hit[1]

    for sub in module.modules():
        for k, p in list(sub._parameters.items()):
            if p is not None:
                sub._parameters[k] = fake(p, True)
        for k, b in list(sub._buffers.items()):
            if b is not None:
                sub._buffers[k] = fake(b, False)
    return module


def _token_input(design) -> int:
    """The vocabulary of a token-id input (0: a float input)."""
    for n in design.nodes.values():
        if n.type == "Input" and n.props.get("dtype") == "int64":
            return max(int(n.props.get("vocab") or 0), 2)
    return 0


def _small(design) -> bool:
    from memdesigner.engine.estimate import estimate

    try:
        return 16 * estimate(design, default_settings("inference")).param_bytes // 4 <= REAL_RUN_MAX_BYTES
    except Exception:  # noqa: BLE001 - a design the engine cannot estimate gets no real run
        return False


def _opt(s) -> str:
    return {"momentum": "sgd_momentum", "none": "sgd"}.get(s.optimizer, s.optimizer)


@contextlib.contextmanager
def _time_limit(seconds: float):
    """Raise _OutOfTime in the step once ``seconds`` pass (main thread with SIGALRM only)."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def alarm(_sig, _frame):
        raise _OutOfTime

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _first_line(err) -> str:
    lines = [ln for ln in str(err).splitlines() if ln.strip()]
    return (lines[0] if lines else "(no message)")[:160]


__all__ = ["BUDGET_S", "VERSION", "check_design", "default_settings", "differs", "settings_dict"]
