"""Reading the user's devices.json without letting one bad entry break anything: each bad entry is
skipped with one line naming the file, the entry and the field; the good entries and the shipped
profiles stay usable, and the window still starts. The file is read within the bounds of
io/bounded_read.py: a FIFO, a device or an endless file there is one problem line, not a hang."""

from __future__ import annotations

import json
import math
from importlib import resources
from pathlib import Path

from memdesigner.engine.device_profile import device_from_dict
from memdesigner.io.bounded_read import BoundedReadError, read_json
from memdesigner.model.registry import MAX_INT

_SCHEMA = None


def _validator():
    global _SCHEMA
    import jsonschema

    if _SCHEMA is None:
        schema = json.loads(resources.files("memdesigner.resources").joinpath("device.schema.json").read_text())
        _SCHEMA = jsonschema.Draft202012Validator(schema)
    return _SCHEMA


def read_user_devices(path: Path, taken_ids=()) -> tuple[list, list[str]]:
    """(devices, problems): the valid entries of ``path`` and one line per problem. A missing file
    is no problem. taken_ids: ids already used (shipped profiles); a repeat would be unreachable."""
    if not path.exists():
        return [], []
    try:
        data = read_json(path, "devices file")
    except BoundedReadError as err:
        return [], [f"{err}; no user devices loaded"]
    if not isinstance(data, dict):
        return [], [f"{path}: (top level): expected an object with a \"devices\" list, got {_kind(data)}; "
                    "no user devices loaded"]
    entries = data.get("devices", [])
    if not isinstance(entries, list):
        return [], [f"{path}: devices: expected a list of device objects, got {_kind(entries)}; "
                    "no user devices loaded"]
    devices, problems, seen = [], [], set(taken_ids)
    for i, entry in enumerate(entries):
        problem = _entry_problem(entry, seen)
        if problem:
            dev_id = entry.get("id") if isinstance(entry, dict) else None
            who = f"devices[{i}]" + (f" (id {dev_id!r})" if isinstance(dev_id, str) else "")
            problems.append(f"{path}: {who}: {problem}; entry skipped")
            continue
        devices.append(device_from_dict(entry, user=True))
        seen.add(entry["id"])
    return devices, problems


def _entry_problem(entry, seen) -> str | None:
    errors = sorted(_validator().iter_errors(entry), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if errors:
        e = errors[0]
        field = ".".join(map(str, e.absolute_path))
        return f"{field}: {e.message}" if field else e.message
    for key in ("memory_bytes", "runtime_overhead_bytes", "allocator_rounding"):
        if entry.get(key, 0) > MAX_INT:  # a 400-digit memory_bytes broke the table's GiB column
            return f"{key}: {_short(entry[key])} is above the maximum 2^62"
    for key in ("bandwidth_bytes_per_s",):
        if key in entry and not _finite(entry[key]):
            return f"{key}: {_short(entry[key])} is not a finite number"
    for dtype, flops in entry.get("peak_flops", {}).items():
        if not _finite(flops):
            return f"peak_flops.{dtype}: {_short(flops)} is not a finite number"
    if entry.get("runtime_overhead_bytes", 0) >= entry["memory_bytes"]:
        return (f"runtime_overhead_bytes: {entry['runtime_overhead_bytes']} is not below memory_bytes "
                f"{entry['memory_bytes']}")
    if entry["id"] in seen:
        return f"id: {entry['id']!r} is already used by another profile"
    return None


def _finite(v) -> bool:
    """A number that is a finite float (an integer of 400 digits is not: float() overflows)."""
    try:
        return math.isfinite(v)
    except OverflowError:
        return False


def _short(v) -> str:
    if isinstance(v, int) and v.bit_length() > 64:
        return f"{v:.3g}" if v.bit_length() < 1000 else f"a number of about {int(v.bit_length() * 0.30103):,} digits"
    return repr(v)


def _kind(value) -> str:
    return "null" if value is None else type(value).__name__
