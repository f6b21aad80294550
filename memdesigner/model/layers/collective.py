"""Collectives that tensor parallelism inserts at estimate time (engine/tensor_parallel.py, sequence
parallel): DTensor's redistribution between a sequence shard ``Shard(1)`` and ``Replicate``.

torch 2.13's functional collectives gather and scatter along dim 0 only, so for a non-batch ``dim``
``redistribute`` lays the chunks out with ``torch.cat`` (``_all_gather_tensor`` /
``_reduce_scatter_tensor`` in ``torch/distributed/_functional_collectives.py``): one whole-size copy
beside the collective's own output, measured on gloo (benchmarks/distributed.py)."""

from memdesigner.model.oprules import OpMem, T
from memdesigner.model.registry import LayerError, LayerType, Prop, TensorSpec, register

_WHY = "a collective inserted at estimate time under --sequence-parallel (engine/tensor_parallel.py)"
_PROPS = (Prop("size", "int", 2, min=1, doc="ranks in the tensor-parallel group"),
          Prop("dim", "int", 1, doc="the sharded dimension (batch is 0): the sequence"))


def _dim(c, nd: int) -> int:
    d = c["dim"] % nd if c["dim"] < 0 else c["dim"]
    if d <= 0 or d >= nd:
        raise LayerError("dim", f"{c['dim']} is not a non-batch dimension of a {nd}-D tensor")
    return d - 1


def _gather_shape(c):
    x = c.inputs[0]
    s = list(x.shape)
    s[_dim(c, len(s) + 1)] *= c["size"]
    return [TensorSpec(tuple(s), x.kind)]


def _scatter_shape(c):
    x = c.inputs[0]
    s = list(x.shape)
    d = _dim(c, len(s) + 1)
    if s[d] % c["size"]:
        raise LayerError("size", f"dimension {d + 1} ({s[d]}) does not split into {c['size']} equal shards")
    s[d] //= c["size"]
    return [TensorSpec(tuple(s), x.kind)]


def _gather_mem(m):
    """Forward: ``all_gather_into_tensor`` (the whole size, chunks stacked on dim 0), then ``cat`` of
    its chunks along ``dim`` (the output); the collective's buffer dies after the cat. Backward: the
    incoming gradient's chunks laid out by ``cat`` (whole size) and reduce-scattered into a shard."""
    dt = m.in_dtypes[0]
    full = m.out_elems(0)
    return OpMem(outputs=[T(full, dt, "all-gathered (cat of the chunks)")], out_dtypes=[dt],
                 temps=[T(full, dt, "all-gather output")], saved=[],
                 grad_in=[T(m.in_elems(0), dt, "reduce-scattered gradient")],
                 bwd_temps=[T(full, dt, "gradient chunks laid out for the reduce-scatter")], param_grads=False)


def _scatter_mem(m):
    """Forward: the partial sums' chunks laid out by ``cat`` (whole size), reduce-scattered into the
    rank's shard (the output). Backward: the gradient all-gathered (whole size) then ``cat``."""
    dt = m.in_dtypes[0]
    full = m.in_elems(0)
    return OpMem(outputs=[T(m.out_elems(0), dt, "reduce-scattered shard")], out_dtypes=[dt],
                 temps=[T(full, dt, "partial sums laid out for the reduce-scatter")], saved=[],
                 grad_in=[T(full, dt, "all-gathered gradient (cat of the chunks)")],
                 bwd_temps=[T(full, dt, "gradient all-gather output")], param_grads=False)


AllGather = register(LayerType(
    name="AllGather", family="tensor",
    doc="Sequence parallel: a Shard(dim) tensor all-gathered to Replicate (the whole sequence on every rank).",
    props=_PROPS, shape=_gather_shape, memory=_gather_mem, flops=lambda c, o: 0,
    keeps_for_backward="nothing", in_palette=False, no_import=_WHY, no_torch_export=_WHY,
))

ReduceScatter = register(LayerType(
    name="ReduceScatter", family="tensor",
    doc="Sequence parallel: a rowwise Linear's partial sums reduce-scattered to Shard(dim).",
    props=_PROPS, shape=_scatter_shape, memory=_scatter_mem, flops=lambda c, o: 0,
    keeps_for_backward="nothing", in_palette=False, no_import=_WHY, no_torch_export=_WHY,
))
