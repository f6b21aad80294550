"""File -> Import -> PyTorch Model: one dialog for the factory, the input shape and the input
dtype (token models need int64 ids; "automatic" picks int64 when the input goes straight into an
embedding), in the window's words rather than the command line's."""

from __future__ import annotations

import os

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QLabel,
    QLineEdit,
    QMessageBox,
    QVBoxLayout,
)

TITLE = "Import PyTorch model"
DTYPES = (("auto", "automatic (int64 when the input feeds an embedding)"), ("float", "float (images, features)"),
          ("int64", "int64 (token ids)"))


class TorchImportDialog(QDialog):
    def __init__(self, path: str, parent=None):
        super().__init__(parent)
        self.setWindowTitle(TITLE)
        self.path = path
        lay = QVBoxLayout(self)
        warn = QLabel(f"<b>{path}</b><br>Importing RUNS this file's Python code (in a separate process): "
                      "import only files you trust.")
        warn.setWordWrap(True)
        lay.addWidget(warn)
        form = QFormLayout()
        self.factory = QLineEdit()
        self.factory.setPlaceholderText("empty: the file's model (the nn.Module class no other class uses)")
        self.shape = QLineEdit()
        self.shape.setPlaceholderText("per sample, e.g. 3, 224, 224 (empty: the factory's own)")
        self.dtype = QComboBox()
        for key, text in DTYPES:
            self.dtype.addItem(text, key)
        form.addRow("Model class or factory:", self.factory)
        form.addRow("Input shape:", self.shape)
        form.addRow("Input dtype:", self.dtype)
        lay.addLayout(form)
        buttons = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        buttons.button(QDialogButtonBox.Ok).setText("Import")
        buttons.accepted.connect(self._accept)
        buttons.rejected.connect(self.reject)
        lay.addWidget(buttons)
        self.error = ""
        self._recall()

    def _key(self) -> str:
        return "torch_import/" + os.path.abspath(self.path).replace("/", "|")  # (QSettings: "/" nests groups)

    def _recall(self) -> None:
        """The factory, shape and dtype last imported from this file (people import the same file
        again after editing it)."""
        last = QSettings().value(self._key())
        if isinstance(last, dict):
            self.factory.setText(str(last.get("factory", "")))
            self.shape.setText(str(last.get("shape", "")))
            i = self.dtype.findData(last.get("dtype", "auto"))
            self.dtype.setCurrentIndex(max(i, 0))

    def remember(self) -> None:
        QSettings().setValue(self._key(), {"factory": self.factory.text().strip(), "shape": self.shape.text().strip(),
                                           "dtype": self.dtype.currentData()})

    def values(self):
        """(FILE[:FACTORY], input shape or None, input dtype or None for automatic); ValueError
        (one line, naming the field) for a shape that is not one."""
        from memdesigner.importers.torch_isolated import parse_input_shape

        shape = parse_input_shape(self.shape.text(), what="Input shape")
        factory = self.factory.text().strip()
        dtype = self.dtype.currentData()
        return (f"{self.path}:{factory}" if factory else self.path), shape, (None if dtype == "auto" else dtype)

    def _accept(self):
        try:
            self.values()
        except ValueError as err:
            QMessageBox.warning(self, TITLE, str(err))
            return
        self.accept()


def ask_and_import(window, path: str | None = None, answer=None):
    """Ask for the file and the dialog's fields, then import on the worker (window._import).
    ``answer(dialog) -> bool`` fills and accepts the dialog instead of showing it (tests)."""
    from memdesigner._qt import hooks

    if not window.maybe_save():
        return None
    if path is None:
        path, _ = QFileDialog.getOpenFileName(window, f"{TITLE} (runs the file's code)", window._last_dir(),
                                              "Python (*.py)")
    if not path:
        return None
    dlg = TorchImportDialog(path, window)
    ok = answer(dlg) if answer is not None else dlg.exec() == QDialog.Accepted
    if not ok:
        return None
    spec, shape, dtype = dlg.values()
    dlg.remember()
    return window._import(lambda cancel: hooks.import_torch(spec, input_shape=shape, input_dtype=dtype, cancel=cancel),
                          "PyTorch")
