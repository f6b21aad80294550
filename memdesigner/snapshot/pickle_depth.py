"""How deep a pickle's tuples may nest, and a thread stack deep enough to unpickle it.

The C unpickler builds nested containers without recursion, but a tuple (or frozenset) used as a
dict key is hashed when the dict is filled, and tuple hashing recurses in C with no depth check:
a 1 MB pickle of one key nested a million deep crashes the process (SIGSEGV) on an 8 MiB stack.
Each nesting level needs one tuple-making opcode, so counting those bytes in the file (C speed)
bounds the depth; the unpickler then runs on a thread whose stack holds that depth. Only when
that bound is beyond any stack (a huge file dense in such bytes) is the pickle walked opcode by
opcode for its real depth.
"""

from __future__ import annotations

import threading

BYTES_PER_LEVEL = 128  # C stack per level of tuple hashing: measured 32-64 B (CPython 3.11, x86-64)
SAFE_LEVELS = 2_000  # fits the smallest default thread stack (512 KiB, macOS)
MAX_STACK = 2 << 30  # virtual: a thread's stack pages are only committed where touched
_TUPLE_OPS = b"\x85\x86\x87"  # TUPLE1, TUPLE2, TUPLE3: one level each
_MARKED = b"t\x91"  # TUPLE, FROZENSET: one level each, and each needs a MARK ("(")


class TooDeep(Exception):
    """The pickle nests deeper than any thread stack this reader would make."""


def depth_bound(f, chunk: int = 1 << 22) -> int:
    """An upper bound on the tuple nesting of the pickle read from ``f`` (to its end): about
    10 ms per MB."""
    counts = dict.fromkeys(b"\x85\x86\x87t\x91(", 0)
    while True:
        b = f.read(chunk)
        if not b:
            break
        for c in counts:
            counts[c] += b.count(c)
    return sum(counts[c] for c in _TUPLE_OPS) + min(sum(counts[c] for c in _MARKED), counts[ord("(")])


def exact_depth(f) -> int:
    """The deepest tuple/frozenset nesting the pickle builds (opcode by opcode: slow)."""
    import pickletools

    stack: list = []  # per stack item: its tuple depth; None: a MARK
    memo: dict = {}
    deepest = 0
    for op, arg, _pos in pickletools.genops(f):
        name = op.name
        if name == "MARK":
            stack.append(None)
            continue
        if name in ("MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT"):
            memo[len(memo) if name == "MEMOIZE" else arg] = stack[-1] if stack else 0
            continue
        if name in ("GET", "BINGET", "LONG_BINGET"):
            stack.append(memo.get(arg, 0))
            continue
        if name in ("TUPLE1", "TUPLE2", "TUPLE3"):
            k = int(name[-1])
            items = stack[-k:]
            del stack[-k:]
            d = 1 + max((x or 0 for x in items), default=0)
            deepest = max(deepest, d)
            stack.append(d)
            continue
        items = []
        if pickletools.markobject in op.stack_before:
            while stack and stack[-1] is not None:
                items.append(stack.pop())
            if stack:
                stack.pop()
        n_plain = len([s for s in op.stack_before if s not in (pickletools.markobject, pickletools.stackslice)])
        for _ in range(min(n_plain, len(stack))):
            items.append(stack.pop())
        if name in ("TUPLE", "FROZENSET"):
            d = 1 + max((x or 0 for x in items), default=0)
            deepest = max(deepest, d)
            stack.append(d)
            continue
        if name in ("APPEND", "APPENDS", "SETITEM", "SETITEMS", "ADDITEMS"):
            stack.append(0)  # the container stays; what it holds is not hashed with it
            continue
        stack.extend([0] * len(op.stack_after))
    return deepest


def call_with_stack_for(levels: int, fn, *args):
    """``fn(*args)``, on a thread whose stack holds ``levels`` of nesting when the caller's may not."""
    if levels <= SAFE_LEVELS:
        return fn(*args)
    need = levels * BYTES_PER_LEVEL + (1 << 20)
    if need > MAX_STACK:
        raise TooDeep(levels)
    box: dict = {}

    def run():
        try:
            box["value"] = fn(*args)
        except BaseException as err:  # noqa: BLE001 - re-raised in the caller
            box["error"] = err

    old = threading.stack_size()
    threading.stack_size((need + 0xFFFF) & ~0xFFFF)
    try:
        th = threading.Thread(target=run, name="memdesigner-unpickle", daemon=True)
        th.start()
    finally:
        threading.stack_size(old)
    th.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
