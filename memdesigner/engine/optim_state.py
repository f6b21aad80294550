"""Optimizer state of the memory-saving optimizers, tensor by tensor, from their sources.

bitsandbytes 0.50 ``AdamW8bit`` / ``PagedAdamW8bit`` (``bnb/optim/optimizer.py``,
``Optimizer2State.init_state``): a parameter with fewer than ``min_8bit_size`` (4096) elements
keeps two fp32 states (8 B per element); a larger one keeps two uint8 states (2 B per element)
and two fp32 absmax vectors of ceil(n / 256) blocks; the signed and unsigned dynamic quantisation
maps (256 fp32 each) are shared by all parameters. The step counter is a Python int. The update
is one fused kernel per parameter (no temporaries). Paged: on CUDA a state buffer of a
parameter with at least 1e5 elements lives in unified memory (cudaMallocManaged through bnb's
page manager): it is not in PyTorch's allocator and the driver evicts it to host RAM under
pressure, so it does not count towards the device peak (``paged_bytes``); smaller ones are
ordinary device tensors. On the CPU bnb falls back to ordinary tensors.

torch.optim.Adafactor (torch >= 2.5, ``torch/optim/_adafactor.py``): a step tensor (fp32 scalar,
on the host) and, for a parameter of two or more dimensions, ``row_var`` (shape[:-1] + (1,)) and
``col_var`` (shape[:-2] + (1, shape[-1])); a vector keeps a full ``variance``. The single-tensor
step makes one parameter-sized ``var_estimate`` per parameter, which lives until the next
parameter's replaces it (a vector also makes ``grad * grad``).
"""

from __future__ import annotations

import math

MIN_8BIT_SIZE = 4096
BLOCK = 256
PAGED_MIN = 100_000
QMAPS = 2 * 256 * 4  # bnb's "dynamic" and "udynamic" maps, fp32
NEW_OPTIMIZERS = ("adamw8bit", "paged_adamw8bit", "adafactor")


def _round(nb: int, rnd: int) -> int:
    return nb if rnd <= 1 else -(-nb // rnd) * rnd


def state_of(opt: str, shape: tuple, numel: int, backend: str, rnd: int) -> tuple[int, int, int]:
    """(raw bytes, allocator-rounded bytes, paged bytes outside the device peak) of one parameter's
    state. Parameters are fp32 (mixed precision keeps fp32 masters)."""
    if opt in ("adamw8bit", "paged_adamw8bit"):
        paged = opt == "paged_adamw8bit" and backend == "cuda" and numel >= PAGED_MIN
        if numel < MIN_8BIT_SIZE:
            parts = [numel * 4, numel * 4]
        else:
            blocks = -(-numel // BLOCK)
            parts = [numel, numel]
            if paged:
                return 2 * blocks * 4, 2 * _round(blocks * 4, rnd), 2 * numel
            parts += [blocks * 4, blocks * 4]
        if paged:
            return 0, 0, sum(parts)
        return sum(parts), sum(_round(p, rnd) for p in parts), 0
    if opt == "adafactor":
        step = 4 if backend == "cpu" else 0  # a host tensor on CUDA
        if len(shape) >= 2:
            rows = math.prod(shape[:-1]) * 4
            cols = math.prod(shape[:-2]) * shape[-1] * 4
            return rows + cols + step, _round(rows, rnd) + _round(cols, rnd) + step, 0
        return numel * 4 + step, _round(numel * 4, rnd) + step, 0
    raise ValueError(opt)


def shared_bytes(opt: str, numels: list[int]) -> int:
    """State shared by all parameters: bnb's two quantisation maps once any state is 8-bit."""
    if opt in ("adamw8bit", "paged_adamw8bit") and any(n >= MIN_8BIT_SIZE for n in numels):
        return QMAPS
    return 0


def step_temps(opt: str, shape: tuple, numel: int, item: int) -> list[int]:
    """Temporaries the step makes for one parameter (see the module docstring)."""
    if opt == "adafactor":
        return [numel * item] if len(shape) >= 2 else [numel * item, numel * item]
    return []
