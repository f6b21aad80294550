"""File → Import → Hugging Face config: pick a config.json, the sequence length and the task."""

from __future__ import annotations

from PySide6.QtWidgets import QFileDialog, QInputDialog

TITLE = "Import Hugging Face config"


def ask_and_import(window, path: str | None = None, seq_len: int | None = None, task: str | None = None,
                   transformers_major: int | None = None):
    """Asks what is not given, then imports off the UI thread through the window's _import. The
    transformers major is the newest unless given (File → Import asks nothing more)."""
    from memdesigner.importers.hf_config import NEWEST, TASKS, import_file

    major = NEWEST if transformers_major is None else transformers_major

    if not window.maybe_save():
        return None
    if path is None:
        path, _ = QFileDialog.getOpenFileName(window, TITLE, window._last_dir(), "config.json (*.json)")
    if not path:
        return None
    if seq_len is None:
        seq_len, ok = QInputDialog.getInt(window, TITLE, "Sequence length (tokens per sample):", 512, 1, 10_000_000)
        if not ok:
            return None
    if task is None:
        task, ok = QInputDialog.getItem(window, TITLE, "Task:", list(TASKS), 0, False)
        if not ok:
            return None
    return window._import(lambda: import_file(path, seq_len=seq_len, task=task, transformers_major=major),
                          "Hugging Face config")
