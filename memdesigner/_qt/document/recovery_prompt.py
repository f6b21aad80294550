"""At start, every autosave a crashed instance left is offered, one question each: Recover (into
this window while it is still empty, else a new window), Discard (deletes that autosave only) or
Later (kept, offered at the next start)."""

from __future__ import annotations

import time

from PySide6.QtWidgets import QMessageBox

from memdesigner._qt.document import recovery
from memdesigner.io.design_file import DesignFileError

_windows: list = []  # extra windows opened for recovered work or the command line's file


def pristine(win) -> bool:
    """Nothing in the window the user could lose: untitled, unchanged and empty."""
    return win.path is None and not win.dirty and not win.design.nodes


def window_for(win):
    """``win`` while it is pristine, else a new window of the same kind (shown)."""
    if pristine(win):
        return win
    other = type(win)()
    _windows.append(other)
    other.destroyed.connect(lambda *_: _windows.remove(other) if other in _windows else None)
    other.show()
    return other


def question_box(parent, rec: recovery.Recoverable, i: int, n: int):
    """The box for one autosave, with its Recover / Discard / Later buttons."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(rec.saved_at))
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Question)
    box.setWindowTitle("Recover unsaved work?" + (f" ({i + 1} of {n})" if n > 1 else ""))
    box.setText(f"memdesigner did not close properly. Recover the unsaved changes to “{rec.name}”?")
    which = f"Autosave {i + 1} of {n}, last" if n > 1 else "Last"
    box.setInformativeText(f"{which} autosaved {when}\nFile: {rec.source_path or 'never saved (untitled)'}\n\n"
                           "Discard deletes this autosave; Later keeps it for the next start.")
    buttons = {"recover": box.addButton("Recover", QMessageBox.AcceptRole),
               "discard": box.addButton("Discard", QMessageBox.DestructiveRole),
               "later": box.addButton("Later", QMessageBox.RejectRole)}
    box.setDefaultButton(buttons["recover"])
    box.setEscapeButton(buttons["later"])
    return box, buttons


def _ask(parent, rec, i, n) -> str:
    box, buttons = question_box(parent, rec, i, n)
    box.exec()
    return next((k for k, b in buttons.items() if box.clickedButton() is b), "later")


def offer(win, ask=None) -> int:
    """Offer each orphaned autosave; returns how many were recovered. ``ask(rec)`` returns
    'recover', 'discard' or 'later' (True / False mean recover / discard)."""
    found = recovery.find()
    done = 0
    for i, rec in enumerate(found):
        choice = ask(rec) if ask is not None else _ask(win, rec, i, len(found))
        choice = {True: "recover", False: "discard"}.get(choice, choice)
        if choice == "discard":
            recovery.discard(rec)
            continue
        if choice != "recover":
            rec.release()
            continue
        try:
            d = recovery.load(rec)
        except DesignFileError as err:
            rec.release()
            QMessageBox.warning(win, "Recovery failed", str(err))
            continue
        target = window_for(win)
        target.set_design(d, rec.source_path, layout=False, unsaved=True)
        target.autosave()  # the recovered work is in this instance's own autosave before the old one goes
        recovery.discard(rec)
        target.statusBar().showMessage("Recovered unsaved work", 6000)
        done += 1
    return done
