"""Sparse mixture-of-experts MLP, as transformers 5.x runs MixtralSparseMoeBlock and
Qwen2MoeSparseMoeBlock.

Router: ``logits = x @ gate.weight.T``, ``softmax`` in fp32, ``topk`` (top_k experts per token),
optionally renormalised (``norm_topk_prob``; Mixtral always, Qwen2-MoE by config). All experts
are resident: ``experts.gate_up_proj`` (E, 2I, H) and ``experts.down_proj`` (E, H, I), SiLU-gated.
Qwen2-MoE adds a dense shared expert (a gated MLP of ``shared_expert_intermediate_size``) scaled
by ``sigmoid(shared_expert_gate(x))``.

Two expert implementations, as transformers has them:

* ``grouped_mm`` (what a PreTrainedModel selects by default): the (token, expert) pairs are
  sorted by expert, the token rows gathered once (tokens x top_k rows), two ``grouped_mm`` calls
  and a SiLU gate run on all rows, and the rows are weighted, put back in order and summed.
* ``eager`` (the per-expert loop; a bare experts module or ``experts_implementation="eager"``):
  one gather and two matmuls per expert; its backward builds a full-size gradient of the 3-D
  expert weights per expert (``select_backward``) and sums them out of place.

Per-expert token counts assume balanced routing: tokens x top_k / num_experts rows each. With
``capacity_factor`` c > 1 every expert holds a buffer of ceil(c x tokens x top_k / E) rows (a
capacity-based implementation; transformers' own blocks are dropless and have c = 1).

The memory rule replays the block's aten ops (allocations and frees, measured with the truth
harness, benchmarks/hf_moe.py) and hands the engine the block's peak, what autograd keeps, and
its backward as stages, one per parameter gradient.
"""

from __future__ import annotations

import math

from memdesigner.model.layers._common import fmt
from memdesigner.model.oprules import In, OpMem, T
from memdesigner.model.registry import LayerError, LayerType, ParamSpec, Prop, TensorSpec, register
from memdesigner.units import DTYPE_BYTES

# parameter indices (the order of named_parameters() in transformers); with ``modulelist``
# experts, expert j's gate/up/down weights are 1 + 3j .. 3 + 3j and the shared expert's follow
_GATE, _GATE_UP, _DOWN = range(3)
_SH_GATE, _SH_UP, _SH_DOWN, _SH_EXPERT_GATE = range(4)  # offsets after the experts' parameters


def _shape(c):
    x = c.inputs[0]
    if not x.shape:
        raise LayerError("inputs", "SparseMoE needs a (tokens, hidden) input per sample")
    if c["top_k"] > c["num_experts"]:
        raise LayerError("top_k", f"{c['top_k']} is more than the {c['num_experts']} experts")
    if x.kind != "float":
        raise LayerError("inputs", f"expects a float input, got {x.kind} {fmt(x.shape)}")
    return [TensorSpec(x.shape)]


def _params(c):
    h = c.inputs[0].shape[-1]
    e, i, si = c["num_experts"], c["intermediate_size"], c["shared_expert_intermediate_size"]
    ps = [ParamSpec("gate.weight", (e, h))]
    if c["impl"] == "modulelist":  # transformers 4: one MLP module per expert, its own Linear weights
        for j in range(e):
            ps += [ParamSpec(f"experts.{j}.gate_proj.weight", (i, h)), ParamSpec(f"experts.{j}.up_proj.weight", (i, h)),
                   ParamSpec(f"experts.{j}.down_proj.weight", (h, i))]
    else:
        ps += [ParamSpec("experts.gate_up_proj", (e, 2 * i, h)), ParamSpec("experts.down_proj", (e, h, i))]
    if si:
        ps += [ParamSpec("shared_expert.gate_proj.weight", (si, h)), ParamSpec("shared_expert.up_proj.weight", (si, h)),
               ParamSpec("shared_expert.down_proj.weight", (h, si)), ParamSpec("shared_expert_gate.weight", (1, h))]
    return ps


def _tokens(shape) -> int:
    return math.prod(shape[:-1])


def _flops(c, outs):
    """Per sample: router, top_k gated experts per token, the shared expert and its gate."""
    x = c.inputs[0]
    n, h = _tokens(x.shape), x.shape[-1]
    e, k, i, si = c["num_experts"], c["top_k"], c["intermediate_size"], c["shared_expert_intermediate_size"]
    f = 2 * n * h * e + n * k * (6 * h * i + 4 * i + 2 * h)
    if si:
        f += n * (6 * h * si + 4 * si + 2 * h + 2 * h)
    return f


def expert_rows(tokens: int, props: dict) -> list[int]:
    """Token rows each expert processes: balanced routing spreads tokens x top_k over the
    experts (the first ones take one more when it does not divide); capacity_factor c > 1 pads
    every expert to ceil(c x tokens x top_k / E) rows, at most one per token."""
    e, k, cf = props["num_experts"], props["top_k"], props["capacity_factor"]
    s = tokens * k
    if cf > 1.0:
        cap = min(math.ceil(cf * s / e), tokens)
        return [cap] * e
    return [s // e + (1 if j < s % e else 0) for j in range(e)]


class _Replay:
    """Named storages alive inside the block, in bytes relative to when it starts; the peak
    per stretch between two parameter gradients (the backward's stages)."""

    def __init__(self, live: dict | None = None):
        self.live = dict(live or {})
        self.cur = 0
        self.peak = 0
        self.segments = [{"param": None, "nbytes": 0, "peak": 0, "freed": []}]

    def a(self, name: str, nbytes: int) -> None:
        if name in self.live:
            raise KeyError(name)
        self.live[name] = nbytes
        self._add(nbytes)

    def _add(self, nbytes: int) -> None:
        self.cur += nbytes
        self.peak = max(self.peak, self.cur)
        seg = self.segments[-1]
        seg["peak"] = max(seg["peak"], self.cur)

    def f(self, *names: str) -> None:
        for name in names:
            if name in self.live:
                self.cur -= self.live.pop(name)
                self.segments[-1]["freed"].append(name)

    def param(self, k: int, nbytes: int) -> None:
        """AccumulateGrad's p.grad appears: a new backward stage."""
        self.segments.append({"param": k, "nbytes": nbytes, "peak": self.cur, "freed": []})
        self._add(nbytes)


class _Sizes:
    def __init__(self, m):
        p = m.props
        self.f = DTYPE_BYTES[m.float_in]
        self.n = _tokens(m.in_shapes[0])
        self.h = m.in_shapes[0][-1]
        self.e, self.k, self.i = p["num_experts"], p["top_k"], p["intermediate_size"]
        self.si = p["shared_expert_intermediate_size"]
        self.norm = p["norm_topk_prob"]
        self.rows = expert_rows(self.n, p)
        self.s = sum(self.rows)  # gathered (token, expert) rows
        self.eager = p["impl"] in ("eager", "modulelist")
        self.ml = p["impl"] == "modulelist"
        self.sh0 = 1 + 3 * self.e if self.ml else 3  # the shared expert's first parameter
        self.rg = m.param_rg  # frozen weights (a LoRA base) get no gradient, nor its sums
        self.nd = self.n * self.h * self.f  # one (tokens, hidden) tensor


def _forward(z: _Sizes, rec: bool) -> _Replay:
    """The block's forward, op by op (transformers 5.24). ``rec``: autograd records, so what
    backward needs stays."""
    r = _Replay()
    f, n, h, e, k = z.f, z.n, z.h, z.e, z.k
    if z.si and not z.ml:  # Qwen2-MoE (5.x): the shared expert runs first, its output waits for the gate
        _shared_forward(r, z, rec)
    r.a("logits", n * e * f)  # held by the block until it returns
    r.a("probs", n * e * 4)   # softmax in fp32 (softmax backward keeps it)
    r.a("vals", n * k * 4)
    r.a("idx", n * k * 8)
    if z.norm:
        r.a("ssum", n * 4)
        if rec:
            r.a("vclone", n * k * 4)  # the in-place division keeps the values it overwrote
        else:
            r.f("ssum")
    if not rec:
        r.f("probs")
    if z.eager:
        _eager_forward(r, z, rec)
    else:
        _grouped_forward(r, z, rec)
    if z.si and z.ml:  # 4.x: after the experts' loop, whose last locals are still bound
        _shared_forward(r, z, rec)
    out = "final"
    if z.si:
        r.a("sg", n * f)
        r.a("sig", n * f)
        r.f("sg")
        r.a("shm", n * h * f)
        if not rec:
            r.f("sh_out", "sig")
        r.a("moe_out", n * h * f)
        r.f("final", "shm")
        out = "moe_out"
    r.f("logits", "vals")
    if not rec:
        r.f("idx")
    if z.ml:  # 4.x: one forward function, its loop's locals die when it returns
        r.f("onehot", "hits")
        if not rec and r.last is not None:
            r.f(f"nz{r.last}", f"cs{r.last}", f"wout{r.last}")
    r.out = out
    return r


def _shared_forward(r: _Replay, z: _Sizes, rec: bool) -> None:
    """Qwen2-MoE's dense shared expert, down(silu(gate(x)) * up(x))."""
    f, n, h, si = z.f, z.n, z.h, z.si
    r.a("sh_g", n * si * f)
    r.a("sh_act", n * si * f)
    if not rec:
        r.f("sh_g")
    r.a("sh_u", n * si * f)
    r.a("sh_m", n * si * f)
    if not rec:
        r.f("sh_act", "sh_u")
    r.a("sh_out", n * h * f)
    if not rec:
        r.f("sh_m")


def _grouped_forward(r: _Replay, z: _Sizes, rec: bool) -> None:
    f, n, h, e, i, s = z.f, z.n, z.h, z.e, z.i, z.s
    r.a("sort_v", s * 8)
    r.a("perm", s * 8)
    r.a("tokidx", s * 8)
    r.a("sel", s * h * f)
    if not rec:
        r.f("tokidx")
    r.a("sw", s * f)
    r.a("hist_in", s * 4)
    r.a("hist", e * 4)
    r.a("offs", e * 4)
    r.a("gu", s * 2 * i * f)
    r.a("gact", s * i * f)
    r.a("act", s * i * f)
    if not rec:
        r.f("gact", "gu")
    r.a("down", s * h * f)
    if not rec:
        r.f("act")
    r.a("wout", s * h * f)  # proj_out (the down projection) stays bound until the function returns
    r.a("inv", s * 8)
    r.a("arange", s * 8)
    r.f("arange")
    r.a("wout2", s * h * f)
    r.f("wout")
    r.a("final", n * h * f)
    r.f("sort_v", "hist_in", "hist", "wout2")
    if not rec:
        r.f("offs", "sel", "sw", "perm", "inv", "down")


def _eager_forward(r: _Replay, z: _Sizes, rec: bool) -> None:
    f, n, h, e, k, i = z.f, z.n, z.h, z.e, z.k, z.i
    r.a("final", n * h * f)
    r.a("minmax", 16)
    r.f("minmax")
    classes = e if z.ml else e + 1  # 5.x one-hot encodes an extra "no expert" class
    r.a("onehot", n * k * classes * 8)
    r.a("hitsum", classes * 8)
    r.a("hitgt", classes)
    r.f("hitsum")
    hit = [j for j, rows in enumerate(z.rows) if rows]
    r.a("hits", len(hit) * 8)
    r.f("hitgt")
    prev = None
    for j in hit:
        rows = z.rows[j]
        r.a("eq", 1)
        r.f("eq")
        r.a(f"nz{j}", 2 * rows * 8)  # torch.where: (top_k_pos, token_idx) share one buffer
        if not rec and prev is not None:
            r.f(f"nz{prev}")
        r.a(f"cs{j}", rows * h * f)
        if not rec and prev is not None:
            r.f(f"cs{prev}")
        if z.ml:
            _module_mlp(r, z, j, rows, rec)
        else:
            r.a(f"gu{j}", rows * 2 * i * f)
            if not rec and prev is not None:
                r.f(f"gu{prev}")
            r.a(f"gact{j}", rows * i * f)
            r.a(f"act{j}", rows * i * f)
            if not rec:
                r.f(f"gact{j}")
                if prev is not None:
                    r.f(f"wout{prev}")
            r.a(f"down{j}", rows * h * f)
            if not rec:
                r.f(f"act{j}")
        r.a(f"w{j}", rows * f)
        r.a(f"wout{j}", rows * h * f)
        if not rec:
            r.f(f"w{j}", f"down{j}")
            if z.ml and prev is not None:  # current_hidden_states rebinds after the weighting
                r.f(f"wout{prev}")
        prev = j
    r.last = prev
    if z.ml:  # the block's own locals (freed when it returns)
        return
    r.f("onehot", "hits")
    if not rec and prev is not None:
        r.f(f"nz{prev}", f"cs{prev}", f"gu{prev}", f"wout{prev}")


def _module_mlp(r: _Replay, z: _Sizes, j: int, rows: int, rec: bool) -> None:
    """transformers 4's expert module, ``down(silu(gate(x)) * up(x))`` (Mixtral's w2(w1, w3)):
    its intermediates are the module's locals, gone when it returns unless autograd keeps them."""
    f, h, i = z.f, z.h, z.i
    r.a(f"g1{j}", rows * i * f)
    r.a(f"sg{j}", rows * i * f)
    if not rec:
        r.f(f"g1{j}")
    r.a(f"u{j}", rows * i * f)
    r.a(f"act{j}", rows * i * f)
    if not rec:
        r.f(f"sg{j}", f"u{j}")
    r.a(f"down{j}", rows * h * f)
    if not rec:
        r.f(f"act{j}")


def _backward(z: _Sizes, saved: dict) -> _Replay:
    """The block's backward, op by op, from what the forward kept and the output's gradient."""
    r = _Replay(dict(saved, gout=z.nd))
    f, n, h, e, k = z.f, z.n, z.h, z.e, z.k
    if z.si:
        r.a("g_sh", z.nd)
        r.a("g_sigfull", z.nd)
        r.a("g_sig", n * f)
        r.f("g_sigfull", "sh_out")
        r.a("g_sg", n * f)
        r.f("g_sig", "sig")
        _pgrad(r, z, z.sh0 + _SH_EXPERT_GATE, h * f)
        r.a("gh_exp", z.nd)  # the input's gradient, summed into as each path's part arrives
        r.f("g_sg")
        if z.ml:  # 4.x: the shared expert ran after the experts' loop: its backward comes first
            _shared_backward(r, z)
    if z.eager:
        _eager_backward(r, z)
    else:
        _grouped_backward(r, z)
    # router: the renormalisation's division, topk's scatter, softmax, the gate's matmul
    if z.norm:
        for t in ("d1", "d2", "d3", "d4"):
            r.a(t, n * k * 4)
        r.f("d2", "d3", "d4")
        r.a("d5", n * k * 4)
        r.a("ds", n * 4)
        r.f("d1", "d5", "ds", "vclone")
        r.a("g_vals2", n * k * 4)
        r.f("g_vals", "ssum")
        r.live["g_vals"] = r.live.pop("g_vals2")
    r.a("tk_zeros", n * e * 4)
    r.a("g_probs", n * e * 4)
    r.f("tk_zeros", "g_vals", "idx")
    r.a("g_logits", n * e * f)
    r.f("g_probs", "probs")
    _pgrad(r, z, _GATE, e * h * f)
    r.a("gh_router", z.nd)
    r.f("g_logits")
    _acc_h(r, z, "gh_router")
    if z.si and not z.ml:  # 5.x: the shared expert ran first: its backward comes last
        _shared_backward(r, z)
    return r


def _shared_backward(r: _Replay, z: _Sizes) -> None:
    f, n, h, si = z.f, z.n, z.h, z.si
    _pgrad(r, z, z.sh0 + _SH_DOWN, h * si * f)
    r.a("g_shm", n * si * f)
    r.f("g_sh", "sh_m")
    r.a("g_shact", n * si * f)
    r.a("g_shu", n * si * f)
    r.f("g_shm", "sh_act", "sh_u")
    _pgrad(r, z, z.sh0 + _SH_UP, si * h * f)
    r.a("gh_up", z.nd)
    r.f("g_shu")
    _acc_h(r, z, "gh_up")
    r.a("g_shg", n * si * f)
    r.f("g_shact", "sh_g")
    _pgrad(r, z, z.sh0 + _SH_GATE, si * h * f)
    r.a("gh_gate", z.nd)
    r.f("g_shg")
    _acc_h(r, z, "gh_gate")


def _grouped_backward(r: _Replay, z: _Sizes) -> None:
    f, h, e, i, s = z.f, z.h, z.e, z.i, z.s
    r.a("g_exp", s * h * f)  # the summed output's gradient expanded to (tokens, top_k, hidden)
    r.f("gout")
    r.a("ip_zeros", s * h * f)
    r.a("g_wout", s * h * f)
    r.f("ip_zeros", "g_exp", "inv")
    r.a("g_down", s * h * f)
    r.a("g_swfull", s * h * f)
    r.a("g_sw", s * f)
    r.f("g_swfull", "g_wout", "sw", "down")
    _pgrad(r, z, _DOWN, e * h * i * f)
    r.a("g_act", s * i * f)
    r.f("g_down", "act")
    r.a("g_gact", s * i * f)
    r.a("g_up", s * i * f)
    r.f("g_act", "gact")
    r.a("g_gate", s * i * f)
    r.f("g_gact", "gu")
    r.a("g_gu", s * 2 * i * f)
    r.f("g_gate", "g_up")
    _pgrad(r, z, _GATE_UP, e * 2 * i * h * f)
    r.a("g_sel", s * h * f)
    r.f("g_gu", "offs", "sel")
    r.a("sw_zeros", s * f)
    r.a("g_vals", s * f)
    r.f("sw_zeros", "g_sw", "perm")
    r.a("h_zeros", z.nd)
    r.a("gh_j", z.nd)
    r.f("h_zeros", "g_sel", "tokidx")
    _acc_h(r, z, "gh_j")


def _eager_backward(r: _Replay, z: _Sizes) -> None:
    """Experts in reverse order. Each expert's weight slice gets a full-size gradient
    (select_backward); the second and later ones are summed out of place."""
    f, n, h, e, k, i = z.f, z.n, z.h, z.e, z.k, z.i
    hit = [j for j, rows in enumerate(z.rows) if rows]
    first = True
    for pos, j in enumerate(reversed(hit)):
        rows = z.rows[j]
        r.a("g_src", rows * h * f)  # index_add_'s source gradient
        r.f(f"wout{j}")
        if pos == len(hit) - 1:
            r.f("gout")
        r.a("g_down", rows * h * f)
        r.a("g_wfull", rows * h * f)
        r.a("g_w", rows * f)
        r.f("g_wfull", "g_src", f"w{j}", f"down{j}")
        r.a("w_zeros", n * k * f)
        r.a("g_vals_j", n * k * f)
        r.f("w_zeros", "g_w")
        if "g_vals" in r.live:
            r.a("g_vals_sum", n * k * f)
            r.f("g_vals", "g_vals_j")
            r.live["g_vals"] = r.live.pop("g_vals_sum")
        else:
            r.live["g_vals"] = r.live.pop("g_vals_j")
        if z.ml:
            _module_mlp_backward(r, z, j, rows)
            first = False
            continue
        r.a("g_act", rows * i * f)
        if z.rg(_DOWN):
            r.a("g_dslice", h * i * f)
        r.f("g_down", f"act{j}")
        _slice_grad(r, z, _DOWN, e * h * i * f, "g_dslice", first)
        r.a("g_gact", rows * i * f)
        r.a("g_up", rows * i * f)
        r.f("g_act", f"gact{j}")
        r.a("g_gate", rows * i * f)
        r.f("g_gact", f"gu{j}")
        r.a("g_gu", rows * 2 * i * f)
        r.f("g_gate", "g_up")
        if z.rg(_GATE_UP):
            r.a("g_guslice", 2 * i * h * f)
        r.a("g_cs", rows * h * f)
        r.f("g_gu", f"cs{j}")
        _slice_grad(r, z, _GATE_UP, e * 2 * i * h * f, "g_guslice", first)
        r.a("h_zeros", z.nd)
        r.a("gh_j", z.nd)
        r.f("h_zeros", "g_cs", f"nz{j}")
        _acc_h(r, z, "gh_j")
        first = False


def _module_mlp_backward(r: _Replay, z: _Sizes, j: int, rows: int) -> None:
    """Expert j's own Linear weights take their gradients whole (AccumulateGrad: no full-size
    select_backward, no sums); up's branch (recorded last) runs before gate's."""
    f, h, i = z.f, z.h, z.i
    k = 1 + 3 * j  # gate, up, down
    r.a("g_act", rows * i * f)
    _pgrad(r, z, k + 2, h * i * f)
    r.f("g_down", f"act{j}")
    r.a("g_sg", rows * i * f)
    r.a("g_u", rows * i * f)
    r.f("g_act", f"u{j}", f"sg{j}")
    _pgrad(r, z, k + 1, i * h * f)
    r.a("g_x3", rows * h * f)
    r.f("g_u")
    r.a("g_g1", rows * i * f)
    r.f("g_sg", f"g1{j}")
    _pgrad(r, z, k, i * h * f)
    r.a("g_x1", rows * h * f)
    r.f("g_g1")
    r.a("g_cs", rows * h * f)
    r.f("g_x1", "g_x3", f"cs{j}")
    r.a("h_zeros", z.nd)
    r.a("gh_j", z.nd)
    r.f("h_zeros", "g_cs", f"nz{j}")
    _acc_h(r, z, "gh_j")


def _pgrad(r: _Replay, z: _Sizes, k: int, nbytes: int) -> None:
    """Parameter k's gradient appears (a new stage); a frozen one's does not take memory."""
    r.param(k, nbytes if z.rg(k) else 0)


def _acc_h(r: _Replay, z: _Sizes, part: str) -> None:
    """autograd sums the input's gradient parts as they arrive (add: a new tensor)."""
    if "gh_exp" in r.live:
        r.a("gh_sum", z.nd)
        r.f("gh_exp", part)
        r.live["gh_exp"] = r.live.pop("gh_sum")
    else:
        r.live["gh_exp"] = r.live.pop(part)


def _slice_grad(r: _Replay, z: _Sizes, k: int, nbytes: int, slice_name: str, first: bool) -> None:
    """select_backward of a 3-D weight: a zero-filled full-size gradient; from the second expert
    on it is added to the running sum (a new tensor; the old sum and the part die). A frozen
    weight (a LoRA base) has none of these."""
    if not z.rg(k):
        return
    if first:
        r.param(k, nbytes)
        r.f(slice_name)
        return
    r.a("w_part", nbytes)
    r.f(slice_name)
    r.a("w_sum", nbytes)
    r.f("w_part", "w_sum")  # the sum replaces the running gradient: same bytes


def _memory(m):
    z = _Sizes(m)
    dt = m.float_in
    rec = m.records
    fwd = _forward(z, rec)
    out = T(z.nd // DTYPE_BYTES[dt], dt, "output")
    if not rec:
        extra = fwd.peak - out.nbytes
        temps = [T(extra, "uint8", "router, gathered rows and expert activations")] if extra > 0 else []
        return OpMem(outputs=[out], out_dtypes=[dt], temps=temps, grad_in=["new"])
    names = [nm for nm in fwd.live if nm != fwd.out]
    saved_t = [T(fwd.live[nm], "uint8", nm) for nm in names]
    kept = sum(fwd.live[nm] for nm in names)
    extra = fwd.peak - out.nbytes - kept
    temps = [T(extra, "uint8", "router and expert activations beyond what backward keeps")] if extra > 0 else []
    bwd = _backward(z, {nm: fwd.live[nm] for nm in names})
    stages = _stages(bwd, names, fwd.live, z.nd, m.params)
    return OpMem(outputs=[out], out_dtypes=[dt], saved=[In(0)] + saved_t, temps=temps, grad_in=["stage"],
                 bwd_stages=stages, notes=[f"expert rows {z.rows}"])


def _stages(r: _Replay, names: list, sizes: dict, grad_bytes: int, params: list) -> list:
    """The replayed backward as engine stages: one per parameter gradient, each holding the
    bytes the replay peaked at beyond what earlier stages left, with an empty stage between two
    (the engine frees a stage's temporaries after the next stage's peak). The last stage's first
    temporary is the input's gradient."""
    index = {nm: k + 1 for k, nm in enumerate(names)}  # saved[0] is the input
    stages = []
    base = 0
    segs = r.segments
    for si, seg in enumerate(segs):
        k = seg["param"]
        pg = seg["nbytes"] if k is not None and k < len(params) else 0
        last = si == len(segs) - 1
        need = seg["peak"] - base - pg
        temps = []
        if last:
            temps.append(T(grad_bytes, "uint8", "gradient of the input"))
            need -= grad_bytes
        if need > 0:
            temps.append(T(need, "uint8", "backward transients (replayed)"))
        released = [index[nm] for nm in seg["freed"] if nm in index]
        stages.append((temps, [k] if k is not None else [], released))
        if not last:
            stages.append(([], [], []))
        base += pg - sum(sizes[nm] for nm in seg["freed"] if nm in index)
    return stages




# -- PyTorch export / import ----------------------------------------------------------------------
# The generated file gets this class: transformers' blocks (5.24) without transformers, op for op
# (the router and the gate in methods of their own, as there, so that their locals die when
# transformers' do). Parameter names are transformers'.
_TORCH_CLASS = '''
class SparseMoeBlock(nn.Module):
    """transformers' MixtralSparseMoeBlock / Qwen2MoeSparseMoeBlock (5.x): router, top-k, SiLU-gated
    experts run as grouped_mm (a model's default) or the eager per-expert loop, optional shared expert."""

    def __init__(self, hidden, num_experts, top_k, intermediate, norm_topk_prob, shared, impl):
        super().__init__()
        self.num_experts, self.top_k, self.norm_topk_prob, self.impl = num_experts, top_k, norm_topk_prob, impl
        self.gate = nn.Linear(hidden, num_experts, bias=False)
        self.experts = nn.Module()
        self.experts.gate_up_proj = nn.Parameter(torch.randn(num_experts, 2 * intermediate, hidden) * 0.02)
        self.experts.down_proj = nn.Parameter(torch.randn(num_experts, hidden, intermediate) * 0.02)
        if shared:
            self.shared_expert = nn.Module()
            self.shared_expert.gate_proj = nn.Linear(hidden, shared, bias=False)
            self.shared_expert.up_proj = nn.Linear(hidden, shared, bias=False)
            self.shared_expert.down_proj = nn.Linear(shared, hidden, bias=False)
            self.shared_expert_gate = nn.Linear(hidden, 1, bias=False)

    def _route(self, h):
        logits = F.linear(h, self.gate.weight)
        probs = F.softmax(logits, dtype=torch.float, dim=-1)
        top_v, top_i = torch.topk(probs, self.top_k, dim=-1)
        if self.norm_topk_prob:
            top_v /= top_v.sum(dim=-1, keepdim=True)
        return logits, top_v.to(logits.dtype), top_i

    def _shared(self, h):
        s = self.shared_expert
        return s.down_proj(F.silu(s.gate_proj(h)) * s.up_proj(h))

    def _apply_gate(self, gate_up):
        gate, up = gate_up.chunk(2, dim=-1)
        return F.silu(gate) * up

    @staticmethod
    def _shape_only(t):
        return t.device.type == "meta" or type(t).__name__ == "FakeTensor"

    def _gmm(self, x, w, offs):
        if self._shape_only(x):  # shape propagation: grouped_mm has no fp32 meta kernel
            return x.new_empty(x.shape[0], w.shape[-1])
        gmm = F.grouped_mm if hasattr(F, "grouped_mm") else torch._grouped_mm
        return gmm(x, w, offs=offs)

    def _grouped(self, h, top_i, top_w):
        k, n = top_i.size(-1), h.size(0)
        sample_weights, expert_ids = top_w.reshape(-1), top_i.reshape(-1)
        expert_ids_g, perm = torch.sort(expert_ids)
        selected = h[perm // k]
        sample_weights_g = sample_weights[perm]
        hist_in = expert_ids_g.float() if h.device.type in ("cpu", "mps") else expert_ids_g.int()
        tokens_per_expert = torch.histc(hist_in, bins=self.num_experts, min=0, max=self.num_experts - 1)
        offsets = torch.cumsum(tokens_per_expert, dim=0, dtype=torch.int32)
        proj_out = self._gmm(selected, self.experts.gate_up_proj.transpose(-2, -1), offsets)
        proj_out = self._apply_gate(proj_out)
        proj_out = self._gmm(proj_out, self.experts.down_proj.transpose(-2, -1), offsets)
        weighted_out = proj_out * sample_weights_g.unsqueeze(-1)
        inv_perm = torch.empty_like(perm)
        inv_perm[perm] = torch.arange(perm.size(0), device=h.device)
        weighted_out = weighted_out[inv_perm]
        final = weighted_out.view(n, k, h.size(-1)).sum(dim=1)
        return final.to(h.dtype)

    def _eager(self, h, top_i, top_w):
        final = torch.zeros_like(h)
        if self._shape_only(h):  # shape propagation: the loop depends on the routing's values
            return final
        with torch.no_grad():
            mask = F.one_hot(top_i, num_classes=self.num_experts + 1).permute(2, 1, 0)
            hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()
        for e in hit:
            e = e[0]
            if e == self.num_experts:
                continue
            top_pos, token_idx = torch.where(mask[e])
            current = h[token_idx]
            gate, up = F.linear(current, self.experts.gate_up_proj[e]).chunk(2, dim=-1)
            current_out = F.silu(gate) * up
            current_out = F.linear(current_out, self.experts.down_proj[e])
            current_out = current_out * top_w[token_idx, top_pos, None]
            final.index_add_(0, token_idx, current_out.to(final.dtype))
        return final

    def forward(self, x):
        shape = x.shape
        h = x.view(-1, shape[-1])
        shared_out = self._shared(h) if hasattr(self, "shared_expert") else None
        _, top_w, top_i = self._route(h)
        out = (self._grouped if self.impl == "grouped_mm" else self._eager)(h, top_i, top_w)
        if shared_out is not None:
            shared_out = F.sigmoid(self.shared_expert_gate(h)) * shared_out
            out = out + shared_out
        return out.reshape(shape)
'''


def _to_torch(e):
    from memdesigner.model.exportspec import ExportUnsupported, TorchExport

    p = e.props
    if p["capacity_factor"] != 1.0:
        raise ExportUnsupported("capacity_factor > 1 (transformers' blocks are dropless)")
    if p["impl"] == "modulelist":
        raise ExportUnsupported("transformers 4's ModuleList experts (the generated block has 3-D expert weights)")
    init = (f"self.{e.attr} = SparseMoeBlock({e.in_shapes[0][-1]}, {e.lit('num_experts')}, {e.lit('top_k')}, "
            f"{e.lit('intermediate_size')}, {e.lit('norm_topk_prob')}, {e.lit('shared_expert_intermediate_size')}, "
            f"{e.lit('impl')})")
    return TorchExport(f"self.{e.attr}({e.x})", init=[init], helpers={"SparseMoeBlock": _TORCH_CLASS})


def _from_torch(mod):
    """Props of a transformers MoE block or of the exported SparseMoeBlock."""
    e = int(mod.gate.weight.shape[0])
    top_k = getattr(mod, "top_k", None) or getattr(mod.gate, "top_k", None)
    if top_k is None:
        return None
    if type(mod).__name__ == "MixtralSparseMoeBlock":
        norm = True
    else:
        norm = bool(getattr(mod, "norm_topk_prob", getattr(mod.gate, "norm_topk_prob", True)))
    shared = int(mod.shared_expert.gate_proj.weight.shape[0]) if hasattr(mod, "shared_expert") else 0
    impl = getattr(mod, "impl", None)
    if hasattr(mod.experts, "down_proj"):  # transformers 5: the experts' weights fused in one module
        ffn = int(mod.experts.down_proj.shape[-1])
        if impl is None:
            cfg = getattr(mod.experts, "config", None)
            impl = "grouped_mm" if getattr(cfg, "_experts_implementation", None) == "grouped_mm" else "eager"
    else:  # transformers 4: a ModuleList of MLPs (Mixtral's w1/w2/w3, Qwen2-MoE's gate/up/down), looped over
        first = mod.experts[0]
        down = getattr(first, "w2", None) or first.down_proj
        ffn, impl = int(down.weight.shape[-1]), impl or "modulelist"
    return {"num_experts": e, "top_k": int(top_k), "intermediate_size": ffn,
            "norm_topk_prob": norm, "shared_expert_intermediate_size": shared, "impl": impl}


SparseMoE = register(LayerType(
    name="SparseMoE", family="dense",
    doc="Sparse mixture of experts (Mixtral / Qwen2-MoE block): a router picks top_k of num_experts "
        "SiLU-gated MLPs per token; all experts are resident; an optional shared expert.",
    props=(Prop("num_experts", "int", 8, min=1, doc="experts (all resident in memory)"),
           Prop("top_k", "int", 2, min=1, doc="experts per token (num_experts_per_tok)"),
           Prop("intermediate_size", "int", 512, min=1, doc="each expert's hidden width"),
           Prop("norm_topk_prob", "bool", True, doc="renormalise the top-k weights (Mixtral: always)"),
           Prop("shared_expert_intermediate_size", "int", 0, min=0,
                doc="Qwen2-MoE's shared expert width; 0 = none"),
           Prop("capacity_factor", "float", 1.0, min=1.0, max=64.0,
                doc="1 = balanced dropless routing (tokens x top_k / E rows per expert); c > 1 pads "
                    "every expert to c x that"),
           Prop("impl", "choice", "grouped_mm", choices=("grouped_mm", "eager", "modulelist"),
                doc="transformers' experts implementation: grouped_mm (a model's default), the "
                    "per-expert eager loop, or transformers 4's ModuleList of expert MLPs")),
    shape=_shape, params=_params, flops=_flops, memory=_memory,
    aliases=("MixtralSparseMoeBlock", "Qwen2MoeSparseMoeBlock", "MoE"),
    search_words=("moe", "mixture of experts", "experts", "router", "mixtral", "qwen2_moe", "sparse"),
    torch_ops=("MixtralSparseMoeBlock", "Qwen2MoeSparseMoeBlock", "SparseMoeBlock"),
    to_torch=_to_torch, from_torch=_from_torch,
    keeps_for_backward="router probabilities and indices, the gathered token rows and every expert "
                       "activation (tokens x top_k rows)",
))
