"""Device profiles: shipped (resources/devices.json) plus the user's own (a JSON file in the
user config folder, same layout)."""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path

from platformdirs import user_config_dir

from memdesigner.engine.device_profile import KINDS, Device, device_from_dict  # noqa: F401 (Device, KINDS: re-exported)
from memdesigner.engine.user_device_file import read_user_devices
from memdesigner.io.atomic_write import write_atomic


def shipped_devices() -> list[Device]:
    data = json.loads(resources.files("memdesigner.resources").joinpath("devices.json").read_text())
    return [device_from_dict(d) for d in data["devices"]]


def user_devices_path() -> Path:
    return Path(user_config_dir("memdesigner")) / "devices.json"


def user_devices(path: Path | None = None) -> list[Device]:
    """The valid entries of the user's devices.json (bad ones are skipped: see device_file_problems)."""
    return _read_user(path)[0]


def device_file_problems(path: Path | None = None) -> list[str]:
    """One line per bad entry (or per unreadable file) of the user's devices.json."""
    return _read_user(path)[1]


def warn_device_file_problems(stream=None) -> None:
    """Write device_file_problems() to stderr as 'memdesigner: warning: ...' lines (for the CLI)."""
    for line in device_file_problems():
        (stream or sys.stderr).write(f"memdesigner: warning: {line}\n")


def _read_user(path: Path | None) -> tuple[list[Device], list[str]]:
    return read_user_devices(path or user_devices_path(), taken_ids={d.id for d in shipped_devices()})


def save_user_devices(devs: list[Device], path: Path | None = None) -> None:
    path = path or user_devices_path()
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
