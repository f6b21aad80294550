"""The patterns in which ONNX splits one layer, found and fused for the importer
(onnx_import.py): MatMul + bias Add, x * Sigmoid(x), the Erf form of GELU, GroupNorm through
InstanceNormalization, scaled_dot_product_attention's chain, nn.MultiheadAttention's ops, stacked
LSTM / GRU layers and TransformerEncoderLayer's inference fast path."""

from __future__ import annotations

from memdesigner.importers._onnx_values import Const, PVal, RnnSeq, Unknown, Val
from memdesigner.model.registry import ShapeCtx


class Fusions:
    """Mixed into the importer: these methods use its graph, values and node builders."""

    def _only_consumer(self, name):
        c = self.cons.get(name, [])
        return c[0] if len(c) == 1 and c[0] >= 0 else None

    def _fuse(self, k, n, ins):
        """Patterns in which ONNX splits one layer. Returns (op, inputs, outputs, name) or None."""
        nodes = self.g.node
        op = n.op_type
        if op == "MatMul" and isinstance(ins[0], Val) and isinstance(ins[1], PVal) and len(ins[1].shape) == 2:
            j = self._only_consumer(n.output[0])
            if j is not None and nodes[j].op_type == "Add":
                other = [i for i in nodes[j].input if i != n.output[0]]
                b = self._val(other[0]) if len(other) == 1 else None
                if isinstance(b, PVal) and tuple(b.shape) == (ins[1].shape[1],):
                    self.done.add(j)
                    return "MatMul+Add", [ins[0], ins[1], b], list(nodes[j].output), n.name
        if op == "Sigmoid" and isinstance(ins[0], Val):
            j = self._only_consumer(n.output[0])
            if j is not None and nodes[j].op_type == "Mul" and set(nodes[j].input) == {n.input[0], n.output[0]}:
                self.done.add(j)
                return "Mul(x,Sigmoid(x))", [ins[0]], list(nodes[j].output), n.name
        if op == "Div" and isinstance(ins[0], Val):
            chain = self._gelu_chain(n)
            if chain is not None:
                self.done.update(chain[:-1])
                return "Mul(Mul(x,Add(Erf(Div(x,c)),1)),0.5)", [ins[0]], list(nodes[chain[-1]].output), n.name
        if op == "Reshape" and isinstance(ins[0], Val):
            gn = self._groupnorm_chain(n, ins)
            if gn is not None:
                return gn
        return None

    def _val_now(self, name, depth=0):
        """A value a fusion needs before the walk reached it: a parameter or constant computed by
        later nodes from initializers alone (the exporter's Unsqueeze of a GroupNorm weight)."""
        v = self._val(name)
        if not isinstance(v, Unknown) or depth > 4:
            return v
        k = next((i for i, n in enumerate(self.g.node) if name in n.output), None)
        if k is None or k in self.done:
            return v
        n = self.g.node[k]
        ins = [self._val_now(i, depth + 1) if i else None for i in n.input]
        if any(isinstance(x, (Val, RnnSeq, Unknown)) for x in ins):
            return v
        self._fold(n, ins)
        self.done.add(k)
        return self._val(name)

    def _const_of(self, name):
        v = self._val(name)
        if isinstance(v, Const) and v.value.size == 1:
            return float(v.value.reshape(-1)[0])
        return None

    def _gelu_chain(self, n):
        """x / sqrt(2) -> Erf -> + 1 -> * x -> * 0.5 (torch's exact GELU before opset 20)."""
        nodes = self.g.node
        c = self._const_of(n.input[1])
        if c is None or abs(c - 2 ** 0.5) > 1e-3:
            return None
        x = n.input[0]
        steps = []
        cur = n.output[0]
        for want in ("Erf", "Add", "Mul", "Mul"):
            j = self._only_consumer(cur)
            if j is None or nodes[j].op_type != want:
                return None
            other = [i for i in nodes[j].input if i != cur]
            if want == "Add" and (len(other) != 1 or self._const_of(other[0]) != 1.0):
                return None
            if want == "Mul" and len(steps) == 2 and other != [x]:
                return None
            if want == "Mul" and len(steps) == 3 and (len(other) != 1 or self._const_of(other[0]) != 0.5):
                return None
            steps.append(j)
            cur = nodes[j].output[0]
        return steps

    def _groupnorm_chain(self, n, ins):
        """Reshape(x, (B, G, -1)) -> InstanceNormalization -> Reshape(x's shape) -> Mul(w) -> Add(b):
        how torch.onnx writes GroupNorm before opset 21."""
        nodes = self.g.node
        x = ins[0]
        out = self._shape(n.output[0])
        if out is None or len(out) != 3:
            return None
        j1 = self._only_consumer(n.output[0])
        if j1 is None or nodes[j1].op_type != "InstanceNormalization":
            return None
        j2 = self._only_consumer(nodes[j1].output[0])
        if j2 is None or nodes[j2].op_type != "Reshape":
            return None
        if self._shape(nodes[j2].output[0]) != tuple(self._shape(n.input[0]) or ()):
            return None
        j3 = self._only_consumer(nodes[j2].output[0])
        if j3 is None or nodes[j3].op_type != "Mul":
            return None
        w = [self._val_now(i) for i in nodes[j3].input if i != nodes[j2].output[0]]
        j4 = self._only_consumer(nodes[j3].output[0])
        if j4 is None or nodes[j4].op_type != "Add" or len(w) != 1 or not isinstance(w[0], PVal):
            return None
        b = [self._val_now(i) for i in nodes[j4].input if i != nodes[j3].output[0]]
        if len(b) != 1 or not isinstance(b[0], PVal):
            return None
        eps = self._attrs(nodes[j1]).get("epsilon", 1e-5)
        self.done.update((j1, j2, j3, j4))
        self._fused_attrs = {"num_groups": int(out[1]), "epsilon": float(eps)}
        return ("Add(Mul(Reshape(InstanceNormalization(Reshape(x))),w),b)", [x, w[0], b[0]],
                list(nodes[j4].output), n.name)

    _SDPA = "MatMul(Softmax(MatMul(Mul(q,s),Mul(Transpose(k),s))),v)"

    def _producer(self, name):
        k = self._made_by.get(name)
        return (k, self.g.node[k]) if k is not None else (None, None)

    def _find_attention(self):
        """torch.onnx writes F.scaled_dot_product_attention as q*sqrt(s) @ (k^T*sqrt(s)) [+ causal
        mask] -> Softmax -> @ v (both operands scaled: code that writes attention out scales only
        q). Those chains are one fused attention op, as PyTorch runs them."""
        import numpy as np

        nodes = self.g.node
        self._made_by = {o: k for k, n in enumerate(nodes) if k in self.live for o in n.output}
        for k2, m2 in enumerate(nodes):
            if k2 not in self.live or m2.op_type != "MatMul":
                continue
            ks, sm = self._producer(m2.input[0])
            if sm is None or sm.op_type != "Softmax" or self._only_consumer(sm.output[0]) != k2:
                continue
            kin, prev = self._producer(sm.input[0])
            causal, chain = False, [ks]
            if prev is not None and prev.op_type == "Add":
                mask = [i for i in prev.input if i in self.folded]
                other = [i for i in prev.input if i not in self.folded]
                if len(mask) != 1 or len(other) != 1 or self._only_consumer(prev.output[0]) != ks:
                    continue
                m = np.asarray(self.folded[mask[0]], dtype=float)
                if m.ndim < 2 or m.shape[-1] != m.shape[-2]:
                    continue
                upper = np.triu(np.ones(m.shape[-2:], dtype=bool), 1)
                if not (np.all(m[..., upper] < -1e30) and np.all(m[..., ~upper] == 0)):
                    continue
                causal = True
                chain.append(kin)
                kin, prev = self._producer(other[0])
            if prev is None or prev.op_type != "MatMul" or self._only_consumer(prev.output[0]) not in chain:
                continue
            chain.append(kin)
            kq, mq = self._producer(prev.input[0])
            kk, mk = self._producer(prev.input[1])
            if mq is None or mk is None or mq.op_type != "Mul" or mk.op_type != "Mul":
                continue
            sq = [i for i in mq.input if i in self.folded]
            sk = [i for i in mk.input if i in self.folded]
            if len(sq) != 1 or len(sk) != 1 or not np.allclose(self.folded[sq[0]], self.folded[sk[0]]):
                continue
            q = next(i for i in mq.input if i not in self.folded)
            kt = next(i for i in mk.input if i not in self.folded)
            kt_k, kt_n = self._producer(kt)
            if kt_n is None or kt_n.op_type != "Transpose" or list(self._attrs(kt_n).get("perm", [])) != [0, 2, 3, 1]:
                continue
            if any(self._only_consumer(x) is None for x in (mq.output[0], mk.output[0], kt)):
                continue
            self.attention[k2] = (q, kt_n, m2.input[1], causal, m2.output[0])
            self.done.update(chain + [kq, kk, kt_k])

    _MHA = "nn.MultiheadAttention (the ops of a module holding <path>.in_proj_weight)"

    _MHA_PARAMS = ("in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias")

    def _find_mha(self):
        """nn.MultiheadAttention exports as some sixty ops under its module's name; the
        initializer ``<path>.in_proj_weight`` names the module. Its ops, read from one tensor
        (self-attention) and giving one, are one MultiHeadAttention node, as PyTorch runs it."""
        nodes = self.g.node
        folded = {k for k, n in enumerate(nodes) if n.output and all(o in self.folded for o in n.output)}
        made = {o: k for k, n in enumerate(nodes) for o in n.output}
        aliases = [n.output[0] for n in nodes if n.op_type == "Identity" and n.output]  # deduplicated copies
        for init in list(self.init_shapes) + list(self.extra_params) + aliases:
            if not init.endswith(".in_proj_weight"):
                continue
            path = init[: -len(".in_proj_weight")]
            region = [k for k in sorted(self.live - folded) if path in self._chain(nodes[k].name)]
            if not region:
                continue
            rs = set(region)
            ext_in = {i for k in region for i in nodes[k].input
                      if i and i not in self.folded and i not in self.init_shapes and i not in self.extra_params
                      and (made.get(i) is None or made[i] not in rs)
                      and not (made.get(i) is not None and all(x in self.init_shapes for x in nodes[made[i]].input))}
            ext_out = {o for k in region for o in nodes[k].output
                       if any(c == -1 or c not in rs for c in self.cons.get(o, []))}
            soft = [k for k in region if nodes[k].op_type == "Softmax"]
            if len(ext_in) != 1 or len(ext_out) != 1 or len(soft) != 1:
                self.warnings.append(f"{path}: an attention module read from {len(ext_in)} tensors, giving "
                                     f"{len(ext_out)}; its ops are imported one by one")
                continue
            out = ext_out.pop()
            last = made[out]
            sshape = self._shape(nodes[soft[0]].output[0])  # (B*H, L, L), or (B, H, L, L) through SDPA
            if not sshape or len(sshape) not in (3, 4) or (len(sshape) == 3 and sshape[0] % self.batch):
                continue
            heads = sshape[0] // self.batch if len(sshape) == 3 else sshape[1]
            # need_weights=False runs scaled_dot_product_attention, whose export scales q and k by
            # sqrt(scale); the default (True) scales q alone and materialises the weights
            need = not any(nodes[k].op_type == "Sqrt" for k in region) and \
                not any(nodes[k].op_type == "Sqrt" for k in folded if path in self._chain(nodes[k].name))
            self.mha[last] = (ext_in.pop(), out, path, heads, need)
            self.done.update(rs - {last})

    def _mha(self, n, x, out, path, heads, need):
        ins = [self._val(x)] + [self._val_now(f"{path}.{p}") for p in self._MHA_PARAMS]
        ins = [v if isinstance(v, (Val, PVal)) else None for v in ins]
        if not isinstance(ins[0], Val):
            return self._generic(n, ins, "attention on a value that was not mapped", outs=[out])
        self._fused_attrs = {"num_heads": heads, "need_weights": int(need)}
        try:
            return self._map(n, self._MHA, ins, [out], n.name, names=[x] + [None] * 4)
        finally:
            self._fused_attrs = None

    def _attention(self, n, q, kt_node, v, causal, out):
        """The fused chain: k is the (B, T, H, D) tensor the exporter transposed to (B, H, D, T),
        seen as (B, H, T, D) like the q and v it is multiplied with."""
        from onnx import helper

        k_name = kt_node.output[0] + "__k"
        self._node(-1, helper.make_node("Transpose", [kt_node.input[0]], [k_name], name=kt_node.name,
                                        perm=[0, 2, 1, 3]), [self._val(kt_node.input[0])])
        ins = [self._val(q), self._val(k_name), self._val(v)]
        if any(not isinstance(x, Val) for x in ins):
            return self._generic(n, ins, "attention on values that were not mapped", outs=[out])
        self._fused_attrs = {"causal": int(causal)}
        try:
            return self._map(n, self._SDPA, ins, [out], n.name, names=[q, None, v])
        finally:
            self._fused_attrs = None

    def _stack_rnn(self, n, ins) -> bool:
        """A second ONNX LSTM/GRU fed by the first one's sequence is its next layer: the design
        has one node with num_layers (as nn.LSTM(num_layers=2) imports from PyTorch)."""
        x = ins[0]
        prev = self._rnn_out.get((x.nid, x.port)) if isinstance(x, Val) else None
        if prev is None or n.input[0] not in self._rnn_single:
            return False
        node = self.design.nodes[prev]
        a = self._attrs(n)
        d = a.get("direction", b"forward")
        bidir = (d.decode() if isinstance(d, bytes) else d) == "bidirectional"
        if node.type != n.op_type or int(a.get("hidden_size", 0)) != node.props["hidden_size"] \
                or bidir != node.props["bidirectional"]:
            return False
        if n.op_type == "GRU" and not int(a.get("linear_before_reset", 0)):
            return False
        node.props["num_layers"] += 1
        node.rev += 1
        for v in ins[1:]:
            if isinstance(v, PVal):
                self.claimed.update(v.sources)
        spec = self._specs(prev)
        self.vals[n.output[0]] = RnnSeq(prev, spec[0], 2 if bidir else 1)
        if len(n.output) > 1:
            self.vals[n.output[1]] = Val(prev, 1, spec[1], (1, 0, 2))
        for o in n.output[2:]:
            self.vals[o] = Unknown()
        return True

    def _specs(self, nid):
        node = self.design.nodes[nid]
        lt = node.layer
        ins = [self._spec_of(e.src, e.src_port) for e in self.design.edges if e.dst == nid]
        return lt.shape(ShapeCtx(lt.coerce_props(node.props), ins, nid))

    def _spec_of(self, nid, port):
        for v in self.vals.values():
            if isinstance(v, Val) and v.nid == nid and v.port == port:
                return v.spec
        raise KeyError(nid)

    def _rnn_output(self, n, ins):
        """Y (T, dirs, B, H) -> Squeeze(1) or Transpose(0, 2, 1, 3) + Reshape(T, B, dirs*H)."""
        y = next(v for v in ins if isinstance(v, RnnSeq))
        op = n.op_type
        a = self._attrs(n)
        axes = a.get("axes")
        if axes is None and len(ins) > 1 and isinstance(ins[1], Const):
            axes = [int(v) for v in ins[1].value.reshape(-1)]
        if op == "Squeeze" and y.dirs == 1 and not y.transposed and list(axes or []) in ([1], [-3]):
            return self._rnn_seq_val(n, y)
        if op == "Transpose" and y.dirs == 2 and list(a.get("perm", [])) == [0, 2, 1, 3]:
            self.vals[n.output[0]] = RnnSeq(y.nid, y.spec, 2, True)
            return None
        if op == "Reshape" and y.transposed and len(self._shape(n.output[0]) or ()) == 3:
            return self._rnn_seq_val(n, y)
        ins = [Val(y.nid, 0, y.spec, (1, 0, 2)) if isinstance(v, RnnSeq) else v for v in ins]
        return self._generic(n, ins, "reads the recurrent output in another layout")

    def _rnn_seq_val(self, n, y):
        v = Val(y.nid, 0, y.spec, (1, 0, 2))
        self.vals[n.output[0]] = v
        self._rnn_out[(y.nid, 0)] = y.nid
        if len(self.cons.get(n.output[0], [])) == 1:
            self._rnn_single.add(n.output[0])
        return None

    def _fast_path_layers(self):
        """nn.TransformerEncoderLayer (children self_attn, linear1, linear2, norm1, norm2 under one
        module path) runs in inference as one fused kernel when PyTorch's fast-path conditions
        hold (bias, an even head count, ReLU or GELU, equal norm eps): only the layer's last op
        then makes a tensor of its own, as the PyTorch importer marks it (Node.fused)."""
        d = self.design
        members: dict = {}
        for nid, node in d.nodes.items():
            parts = node.scope.split("/") if node.scope else []
            for k, part in enumerate(parts):
                members.setdefault(part, []).append((nid, parts[k + 1] if k + 1 < len(parts) else ""))
        for path, items in members.items():
            child = {}
            for nid, sub in items:
                child.setdefault(sub, []).append(d.nodes[nid])
            need = [f"{path}.{c}" for c in ("self_attn", "linear1", "linear2", "norm1", "norm2")]
            if not all(len(child.get(c, [])) == 1 for c in need):
                continue
            mha, n1, n2 = child[need[0]][0], child[need[3]][0], child[need[4]][0]
            acts = [nd for nd in child.get("", []) + child.get(f"{path}.activation", [])
                    if nd.type in ("ReLU", "GELU")]
            if (mha.type != "MultiHeadAttention" or not mha.props["bias"] or mha.props["num_heads"] % 2
                    or len(acts) != 1 or n1.type != "LayerNorm" or n1.props["eps"] != n2.props["eps"]):
                continue
            for nid, _ in items:
                d.nodes[nid].fused = path
