"""Crash recovery: the open design is written every few seconds to a per-process file in the
user data folder; a clean exit deletes it, so a file left behind by a dead process means a crash."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from memdesigner.io.design_file import design_from_dict, design_to_dict
from memdesigner.model.design import Design


def recovery_dir() -> Path:
    from platformdirs import user_data_dir

    return Path(os.environ.get("MEMDESIGNER_RECOVERY_DIR") or Path(user_data_dir("memdesigner")) / "recovery")


def own_file() -> Path:
    return recovery_dir() / f"autosave-{os.getpid()}.json"


def write(design: Design, source_path: str | None) -> Path:
    path = own_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"saved_at": time.time(), "path": source_path, "design": design_to_dict(design)}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, path)
    return path


def clear() -> None:
    try:
        own_file().unlink()
    except OSError:
        pass


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


@dataclass
class Recoverable:
    file: Path
    source_path: str | None
    saved_at: float
    name: str


def find() -> list[Recoverable]:
    """Autosaves left by processes that are no longer running, newest first."""
    d = recovery_dir()
    out = []
    if not d.is_dir():
        return out
    for f in d.glob("autosave-*.json"):
        try:
            pid = int(f.stem.split("-", 1)[1])
        except ValueError:
            continue
        if _alive(pid):
            continue
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
            out.append(Recoverable(f, data.get("path"), float(data.get("saved_at", 0)),
                                   data.get("design", {}).get("name", "untitled")))
        except (OSError, ValueError):
            continue
    return sorted(out, key=lambda r: -r.saved_at)


def load(rec: Recoverable) -> Design:
    data = json.loads(rec.file.read_text(encoding="utf-8"))
    return design_from_dict(data["design"], str(rec.file))


def discard(rec: Recoverable) -> None:
    try:
        rec.file.unlink()
    except OSError:
        pass
