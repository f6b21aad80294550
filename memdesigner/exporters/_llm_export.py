"""PyTorch code for the LLM layer types (model/layers/transformer.py), written as Hugging Face's
modeling code runs them, so that an exported design measures like the model it came from."""

from __future__ import annotations

from dataclasses import dataclass, field

TYPES = ("RMSNorm", "RotaryEmbedding", "ApplyRotary", "RepeatKV", "CausalMask")


@dataclass
class Code:
    init: list = field(default_factory=list)
    forward: list = field(default_factory=list)


def export(t: str, p: dict, attr: str, ins: list, in_shapes: list, outs: list) -> Code:
    c = Code()
    x = ins[0]
    v = outs[0]
    if t == "RMSNorm":
        h = in_shapes[0][-1]
        eps = repr(float(p["eps"]))
        norm = f"({x}.float() * torch.rsqrt({x}.float().pow(2).mean(-1, keepdim=True) + {eps}))"
        if p["variant"] == "gemma":
            c.init.append(f"self.{attr} = nn.Parameter(torch.zeros({h}))")
            c.forward.append(f"{v} = ({norm} * (1.0 + self.{attr}.float())).type_as({x})")
        elif p["variant"] == "torch":
            c.init.append(f"self.{attr} = nn.RMSNorm({h}, eps={eps})")
            c.forward.append(f"{v} = self.{attr}({x})")
        else:
            c.init.append(f"self.{attr} = nn.Parameter(torch.ones({h}))")
            c.forward.append(f"{v} = self.{attr} * {norm}.to({x}.dtype)")
    elif t == "RotaryEmbedding":
        d = int(p["head_dim"])
        theta = repr(float(p["theta"]))
        c.init.append(f"self.register_buffer('{attr}_inv_freq', 1.0 / ({theta} ** (torch.arange(0, {d}, 2)"
                      f".float() / {d})), persistent=False)")
        c.forward.append(f"{v}_freqs = torch.arange({x}.shape[1], device={x}.device)[None, :, None].float() "
                         f"* self.{attr}_inv_freq")
        c.forward.append(f"{v}_emb = torch.cat(({v}_freqs, {v}_freqs), dim=-1)")
        c.forward.append(f"{v} = ({v}_emb.cos() * {float(p['scaling'])!r}).to({x}.dtype)")
        c.forward.append(f"{outs[1]} = ({v}_emb.sin() * {float(p['scaling'])!r}).to({x}.dtype)")
        c.forward.append(f"del {v}_freqs, {v}_emb")
    elif t == "ApplyRotary":
        cos, sin = ins[1], ins[2]
        half = in_shapes[0][-1] // 2
        rot = f"torch.cat((-{x}[..., {half}:], {x}[..., :{half}]), dim=-1)"
        line = f"({x} * {cos}.unsqueeze(1)) + ({rot} * {sin}.unsqueeze(1))"
        if p.get("concat_pass"):
            line = f"torch.cat([{line}, {x}[..., {2 * half}:]], dim=-1)"
        c.forward.append(f"{v} = {line}")
    elif t == "RepeatKV":
        n = int(p["n_rep"])
        c.forward.append(f"{v} = {x}[:, :, None].expand(-1, -1, {n}, -1, -1).reshape({x}.shape[0], -1, "
                         f"{x}.shape[2], {x}.shape[3])" if n > 1 else f"{v} = {x}")
    elif t == "CausalMask":
        n = in_shapes[0][0]
        w = int(p["sliding_window"])
        m = f"torch.ones({n}, {n}, dtype=torch.bool, device={x}.device).tril()"
        if w:
            m = f"({m} & ~torch.ones({n}, {n}, dtype=torch.bool, device={x}.device).tril(-{w}))"
        m = f"{m}[None, None].expand({x}.shape[0], 1, {n}, {n})"
        if p["dtype"] == "float":
            m = f"torch.zeros({x}.shape[0], 1, {n}, {n}, device={x}.device).masked_fill(~{m}, " \
                f"torch.finfo(torch.float32).min)"
        c.forward.append(f"{v} = {m}")
    return c
