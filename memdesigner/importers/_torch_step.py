"""One step of a model under a TorchDispatchMode storage tracker: method (a) of
shared/truth/measure.py, simplified and self-contained. The window's Measure with PyTorch
(measure/torch_measure.py) runs it on the exported module; the PyTorch import runs it on the
user's own module, on fake tensors, to check the design it made (_torch_check.py). It lives here,
below both, because the importers may not import measure/."""

from __future__ import annotations

import functools
import threading
import weakref

# the harness's phases of a step -> the engine's (Event.phase); None: outside the estimate's ops
ENGINE_PHASE = {"forward": "forward", "loss": "forward", "backward": "backward", "step": "optimizer_step",
                "zero_grad": None, "release": None}


def make_tracker(torch, device_type: str, tags=None):
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    class StorageTracker(TorchDispatchMode):
        """Counts live untyped storages on ``device_type``; a weakref on each storage's Python
        object fires when the StorageImpl is freed."""

        def __init__(self):
            super().__init__()
            self.live: dict = {}
            self.cur = 0
            self.peak = 0
            self.phase = None
            self.phase_peak: dict = {}
            self.timeline: list = []
            self.timeline_phase: list = []  # the harness phase of each timeline entry
            self.timeline_layer: list = []  # the design layer of each (measure/layer_tags.py)
            self.timeline_op: list = []  # the aten op of each (the import's check names them)
            self.lock = threading.RLock()

        def _bump(self, delta):
            self.cur += delta
            self.peak = max(self.peak, self.cur)
            if self.phase is not None and self.cur > self.phase_peak.get(self.phase, 0):
                self.phase_peak[self.phase] = self.cur

        def _free(self, key, wr):
            with self.lock:
                ent = self.live.get(key)
                if ent is not None and ent[1] is wr:
                    del self.live[key]
                    self._bump(-ent[0])

        def see(self, t):
            if not isinstance(t, torch.Tensor) or t.device.type != device_type:
                return
            try:
                st = t.untyped_storage()
            except Exception:  # noqa: BLE001 - opaque tensors have no storage
                return
            key, nb = st._cdata, st.nbytes()
            with self.lock:
                ent = self.live.get(key)
                if ent is None:
                    wr = weakref.ref(st, functools.partial(self._free, key))
                    self.live[key] = [nb, wr]
                    self._bump(nb)
                elif ent[0] != nb:
                    self._bump(nb - ent[0])
                    ent[0] = nb

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            for a in tree_leaves((args, kwargs)):
                self.see(a)
            out = func(*args, **kwargs)
            for o in tree_leaves(out):
                self.see(o)
            with self.lock:
                self.timeline.append(self.cur)
                self.timeline_phase.append(self.phase[1] if self.phase is not None else None)
                self.timeline_layer.append(tags.tag() if tags is not None else None)
                self.timeline_op.append(func)
            return out

        def enter(self, step, phase):
            with self.lock:
                self.phase = (step, phase)
                self.phase_peak[self.phase] = self.cur

        def leave(self):
            with self.lock:
                self.phase = None

    return StorageTracker()


def builtin_measure(factory, s, device, opt_name, steps, seed, tags=None) -> dict:
    import torch

    torch.manual_seed(seed)
    model, shape = factory()
    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[s.dtype]
    if any(t.device.type != device for t in model.parameters()):  # (a fake model cannot be swapped in place)
        model = model.to(device=device)
    if dtype != torch.float32:
        model = model.to(dtype=dtype)
    train = s.mode == "train"
    model.train(train)
    torch.manual_seed(seed + 1)
    spec = getattr(model, "truth_input", None)
    full = (s.batch, *tuple(shape))
    if spec is not None and spec[0] == "tokens":
        x = torch.randint(0, int(spec[1]), full, device=device, dtype=torch.int64)
    else:
        x = torch.randn(full, device=device, dtype=dtype)
    params = list(model.parameters())
    opt = None
    if train:
        kw = {"foreach": s.foreach}
        if opt_name == "sgd":
            opt = torch.optim.SGD(params, lr=1e-3, **kw)
        elif opt_name == "sgd_momentum":
            opt = torch.optim.SGD(params, lr=1e-3, momentum=0.9, **kw)
        elif opt_name == "adam":
            opt = torch.optim.Adam(params, lr=1e-4, **kw)
        else:
            opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01, **kw)
    amp_dtype = None
    if s.amp:
        amp_dtype = torch.bfloat16 if device == "cpu" else torch.float16
    tr = make_tracker(torch, device, tags)
    for t in list(model.parameters()) + list(model.buffers()) + [x]:
        tr.see(t)

    from torch.utils._pytree import tree_leaves

    def loss_of(out):
        if isinstance(out, torch.Tensor):
            return out.mean()
        # as the truth harness: every floating tensor of the output's pytree (tuples, dicts and
        # transformers' ModelOutput, whose iteration yields its keys)
        leaves = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor) and t.is_floating_point()]
        loss = leaves[0].mean()
        for t in leaves[1:]:
            loss = loss + t.mean()
        return loss

    steady_tl_start = 0
    with tr:
        for step in range(1, steps + 1):
            if step == steps:
                steady_tl_start = len(tr.timeline)
            if train:
                tr.enter(step, "zero_grad")
                opt.zero_grad(set_to_none=True)
                tr.enter(step, "forward")
                if amp_dtype is not None:
                    with torch.autocast(device, dtype=amp_dtype):
                        out = model(x)
                        tr.enter(step, "loss")
                        loss = loss_of(out)
                else:
                    out = model(x)
                    tr.enter(step, "loss")
                    loss = loss_of(out)
                tr.enter(step, "backward")
                loss.backward()
                tr.enter(step, "step")
                opt.step()
                tr.enter(step, "release")
                del out, loss
                tr.leave()
            else:
                with torch.no_grad():
                    tr.enter(step, "forward")
                    if amp_dtype is not None:
                        with torch.autocast(device, dtype=amp_dtype):
                            out = model(x)
                    else:
                        out = model(x)
                    tr.enter(step, "release")
                    del out
                    tr.leave()
    pp = tr.phase_peak
    last = steps
    if train:
        phases = {"forward": max(pp.get((last, "forward"), 0), pp.get((last, "loss"), 0)),
                  "backward": pp.get((last, "backward"), 0), "optimizer_step": pp.get((last, "step"), 0)}
    else:
        phases = {"forward": pp.get((last, "forward"), 0)}
    return {"peak_bytes": tr.peak, "phase_peaks": phases, "timeline": tr.timeline[steady_tl_start:],
            "timeline_phases": [ENGINE_PHASE.get(p) for p in tr.timeline_phase[steady_tl_start:]],
            "timeline_layers": tr.timeline_layer[steady_tl_start:] if tags is not None else None,
            "timeline_ops": [str(f) for f in tr.timeline_op[steady_tl_start:]],
            "device": device}



__all__ = ["ENGINE_PHASE", "builtin_measure", "make_tracker"]
