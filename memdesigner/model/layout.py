"""Strides, the way PyTorch decides whether a reshape is a view or a copy.

Memory rules need to know when an op copies its input: a reshape (Flatten, matmul's 3-D fold,
a 3-D Linear) is free when the input's strides allow a view and costs a full copy otherwise.
Size-1 dimensions never matter, so a "transposed" batch-1 tensor is often still viewable.
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=4096)
def contiguous_strides(shape: tuple) -> tuple:
    out = []
    acc = 1
    for size in reversed(shape):
        out.append(acc)
        acc *= max(size, 1)
    return tuple(reversed(out))


def is_contiguous(shape, strides) -> bool:
    expected = 1
    for size, st in zip(reversed(shape), reversed(strides)):
        if size == 1:
            continue
        if st != expected:
            return False
        expected *= size
    return True


def view_strides(shape, strides, new_shape):
    """Strides of ``tensor.view(new_shape)``, or None when only a copy can produce that shape
    (PyTorch's computeStride). ``new_shape`` may hold one -1."""
    shape, strides, new_shape = list(shape), list(strides), list(new_shape)
    numel = 1
    for s in shape:
        numel *= s
    if -1 in new_shape:
        known = 1
        for s in new_shape:
            if s != -1:
                known *= s
        new_shape[new_shape.index(-1)] = numel // known if known else 0
    if not shape:
        return tuple(1 for _ in new_shape)
    if numel == 0:
        return contiguous_strides(tuple(new_shape))
    new_strides = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base = strides[-1]
    tensor_numel = 1
    view_numel = 1
    for tensor_d in range(len(shape) - 1, -1, -1):
        tensor_numel *= shape[tensor_d]
        if tensor_d == 0 or (shape[tensor_d - 1] != 1 and strides[tensor_d - 1] != tensor_numel * chunk_base):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_base
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base = strides[tensor_d - 1]
                tensor_numel = 1
                view_numel = 1
    if view_d != -1:
        return None
    return tuple(new_strides)


@lru_cache(maxsize=4096)
def dense_like(shape: tuple, strides: tuple) -> tuple:
    """Output strides of an element-wise op (TensorIterator): dense, in the input's memory order."""
    order = sorted(range(len(shape)), key=lambda d: (-strides[d] if shape[d] != 1 else 1, d))
    return strides_in_order(shape, order)


def strides_in_order(shape, order) -> tuple:
    """Dense strides of ``shape`` laid out with ``order``'s dimensions outermost first."""
    out = [0] * len(shape)
    acc = 1
    for d in reversed(order):
        out[d] = acc
        acc *= max(shape[d], 1)
    return tuple(out)


def permuted(strides, perm) -> tuple:
    return tuple(strides[p] for p in perm)
