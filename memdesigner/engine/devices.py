"""Device profiles: shipped (resources/devices.json) plus the user's own (a JSON file in the
user config folder, same layout)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path

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


def _from_dict(d: dict, user: bool = False) -> Device:
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


def shipped_devices() -> list[Device]:
    data = json.loads(resources.files("memdesigner.resources").joinpath("devices.json").read_text())
    return [_from_dict(d) for d in data["devices"]]


def user_devices_path() -> Path:
    from platformdirs import user_config_dir

    return Path(user_config_dir("memdesigner")) / "devices.json"


def user_devices(path: Path | None = None) -> list[Device]:
    """The valid entries of the user's devices.json (bad ones are skipped: see device_file_problems)."""
    return _read_user(path)[0]


def device_file_problems(path: Path | None = None) -> list[str]:
    """One line per bad entry (or per unreadable file) of the user's devices.json."""
    return _read_user(path)[1]


def warn_device_file_problems(stream=None) -> None:
    """Write device_file_problems() to stderr as 'memdesigner: warning: ...' lines (for the CLI)."""
    import sys

    for line in device_file_problems():
        (stream or sys.stderr).write(f"memdesigner: warning: {line}\n")


def _read_user(path: Path | None) -> tuple[list[Device], list[str]]:
    from memdesigner.engine.user_device_file import read_user_devices

    return read_user_devices(path or user_devices_path(), taken_ids={d.id for d in shipped_devices()})


def save_user_devices(devs: list[Device], path: Path | None = None) -> None:
    path = path or user_devices_path()
    from memdesigner.io.atomic_write import write_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps({"devices": [d.to_dict() for d in devs]}, indent=2))


def all_devices(user_path: Path | None = None) -> list[Device]:
    return shipped_devices() + user_devices(user_path)


def get_device(device_id: str, user_path: Path | None = None) -> Device:
    for d in all_devices(user_path):
        if d.id == device_id:
            return d
    known = ", ".join(d.id for d in all_devices(user_path))
    raise KeyError(f"unknown device {device_id!r}; known: {known}")
