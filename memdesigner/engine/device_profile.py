"""A device profile and how one is read from a JSON entry: below devices.py (the shipped and user
lists) and user_device_file.py (the user's file, checked entry by entry), which both build them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

KINDS = ("cuda", "cpu", "mps")


@dataclass(frozen=True)
class Device:
    id: str
    name: str
    kind: str  # cuda | cpu | mps
    memory_bytes: int  # as sold (GB = 10^9 or GiB where the vendor sells GiB)
    runtime_overhead_bytes: int = 0  # CUDA context, kernel images, cuBLAS/cuDNN handles
    allocator_rounding: int = 512  # the caching allocator's block granularity
    bandwidth_bytes_per_s: float = 0.0
    peak_flops: dict = field(default_factory=dict)  # dtype -> FLOP/s
    notes: str = ""
    user: bool = False

    @property
    def usable_bytes(self) -> int:
        return self.memory_bytes - self.runtime_overhead_bytes

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("user")
        return d


def device_from_dict(d: dict, user: bool = False) -> Device:
    kind = d.get("kind", "cuda")
    if kind not in KINDS:
        raise ValueError(f"device {d.get('id')!r}: kind {kind!r} is not one of {KINDS}")
    return Device(
        id=str(d["id"]), name=str(d.get("name", d["id"])), kind=kind, memory_bytes=int(d["memory_bytes"]),
        runtime_overhead_bytes=int(d.get("runtime_overhead_bytes", 0)),
        allocator_rounding=int(d.get("allocator_rounding", 512 if kind == "cuda" else 1)),
        bandwidth_bytes_per_s=float(d.get("bandwidth_bytes_per_s", 0.0)),
        peak_flops=dict(d.get("peak_flops", {})), notes=str(d.get("notes", "")), user=user,
    )
