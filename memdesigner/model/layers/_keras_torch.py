"""How Keras 3 layers run on the PyTorch backend, as memory: the ops Keras itself issues.

A Keras layer is not PyTorch's module of the same name. On ``KERAS_BACKEND=torch`` (Keras 3.15,
measured with the truth harness on the CPU):

* Dense and Conv add their bias with a separate ``ops.add``: the raw matmul / convolution output
  and the biased one are alive together (PyTorch's addmm / convolution add it inside).
* Convolutions and pooling on channels-last tensors transpose the input to channels first with
  ``permute(...).contiguous()`` (a copy unless the memory already is), convolutions then copy it
  again to ``torch.channels_last`` memory (2-D / 3-D) and the kernel, stored (k..., in, out),
  too; the convolution keeps both copies for backward. A convolution's output is channels-last
  memory, a pooling's is channels-first memory seen through a permute.
* BatchNormalization is ``(x - mean).mul_(scale).add_(offset)`` with moments from
  ``mean(x)`` and ``mean(square(x))``: training keeps the input, the output and a clone of
  ``x - mean`` that the in-place ``mul_`` saves; its backward makes one more full-size gradient.

The layer types that Keras files map onto carry a prop ``impl`` ("torch" | "keras_torch"); their
memory rules call these helpers when it says keras_torch. Element counts and parameters are
those of the layer itself.
"""

from __future__ import annotations

import math

from memdesigner.model.layout import strides_in_order
from memdesigner.model.oprules import In, MemCtx, T
from memdesigner.model.registry import Prop

IMPL = Prop("impl", "choice", "torch", choices=("torch", "keras_torch"),
            doc="torch: PyTorch's module; keras_torch: a Keras 3 layer on the PyTorch backend "
                "(its bias add, layout copies and BatchNormalization ops are its own)")


def keras(m: MemCtx) -> bool:
    return m.props.get("impl") == "keras_torch"


def _dense_order(shape, strides, order) -> bool:
    """Whether ``strides`` are dense in the dimension order ``order`` (outermost first), size-1
    dimensions ignored."""
    acc = 1
    for d in reversed(order):
        if shape[d] != 1 and strides[d] != acc:
            return False
        acc *= shape[d]
    return True


def channels_last_order(rank: int) -> tuple:
    """Dimensions of a (B, C, *spatial) tensor, outermost first, in channels-last memory."""
    return (0,) + tuple(range(2, rank)) + (1,)


def channels_last_strides(shape) -> tuple:
    return strides_in_order(shape, channels_last_order(len(shape)))


def is_channels_last(shape, strides) -> bool:
    return _dense_order(shape, strides, channels_last_order(len(shape)))


def is_channels_first(shape, strides) -> bool:
    return _dense_order(shape, strides, tuple(range(len(shape))))


def layout_copies(m: MemCtx, to_channels_last: bool):
    """The copies Keras makes of input 0 before a conv / pool: ``permute(...).contiguous()``
    and, for 2-D / 3-D convolutions, ``.contiguous(memory_format=channels_last)``.
    Returns (copies made, in order; the tensor the op then reads: In(0) or the last copy)."""
    shape = m.in_shapes[0]
    strides = m.in_strides[0] if m.in_strides else channels_last_strides(shape)
    dt = m.in_dtypes[0]
    n = math.prod(shape)
    copies = []
    cf = is_channels_first(shape, strides)
    if not cf:
        copies.append(T(n, dt, "input permuted to channels first (.contiguous())"))
        cf = True
    if to_channels_last and len(shape) >= 4:
        cl = is_channels_last(shape, strides) if not copies else is_channels_last(shape, _cf_strides(shape))
        if not cl:
            copies.append(T(n, dt, "input copied to channels_last memory"))
    return copies, (copies[-1] if copies else In(0))


def _cf_strides(shape) -> tuple:
    out, acc = [0] * len(shape), 1
    for d in reversed(range(len(shape))):
        out[d] = acc
        acc *= max(shape[d], 1)
    return tuple(out)


def kernel_copy(m: MemCtx, weight_shape) -> T | None:
    """A 2-D / 3-D conv kernel, stored (k..., in, out) and permuted to (out, in, k...), copied to
    channels_last memory unless that view already is (only with size-1 dimensions)."""
    if len(weight_shape) < 4:
        return None
    n = len(weight_shape)
    keras_shape = tuple(weight_shape[2:]) + (weight_shape[1], weight_shape[0])
    ks = _cf_strides(keras_shape)
    # (out, in, k...) = keras dims (n-1, n-2, 0, 1, ...)
    perm = (n - 1, n - 2) + tuple(range(n - 2))
    strides = tuple(ks[p] for p in perm)
    if is_channels_last(tuple(weight_shape), strides):
        return None
    return T(math.prod(weight_shape), m.dtype, "kernel copied to (out, in, k...) channels_last")


__all__ = ["IMPL", "keras", "layout_copies", "kernel_copy", "channels_last_strides", "is_channels_last"]
