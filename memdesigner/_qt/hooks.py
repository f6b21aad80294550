"""Optional features that live in other packages (PyTorch/Keras import, measuring with PyTorch),
imported only when the user asks, so the window works without torch installed."""

from __future__ import annotations


class MissingFeature(Exception):
    """The module or its dependency is not installed; the message says what to install."""


def import_torch(path_spec: str, input_shape=None, timeout: float | None = None, input_dtype=None, cancel=None):
    """Runs the file in a child process (importing executes it): its sys.exit, endless loop or
    chdir cannot close, freeze or move the window; the window calls this off the UI thread, and
    ``cancel`` (a threading.Event) kills the child. input_dtype None: int64 when the input goes
    into an embedding, float otherwise."""
    try:
        from memdesigner.importers.torch_isolated import DEFAULT_TIMEOUT_S, import_file_isolated
    except ImportError as err:
        raise MissingFeature(f"PyTorch import is not available ({err}). Install PyTorch: "
                             "pip install 'memdesigner[torch]'") from None
    try:
        return import_file_isolated(path_spec, input_shape=input_shape, input_dtype=input_dtype,
                                    timeout=timeout or DEFAULT_TIMEOUT_S, cancel=cancel)
    except ImportError as err:
        raise MissingFeature(f"PyTorch import needs torch ({err}). Install it: pip install 'memdesigner[torch]'") from None


def import_keras(path: str):
    try:
        from memdesigner.importers.keras_json import load_keras_json
    except ImportError as err:
        raise MissingFeature(f"Keras import is not available in this installation ({err}).") from None
    return load_keras_json(path)


def _onnx():
    try:
        import onnx  # noqa: F401
    except ImportError as err:
        raise MissingFeature(f"ONNX import needs the onnx package ({err}). Install it: "
                             "pip install 'memdesigner[onnx]'") from None
    from memdesigner.importers import onnx_import

    return onnx_import


def onnx_dynamic_input(path: str) -> str | None:
    """The input's dims when the file leaves more than the batch open (ask for a shape)."""
    try:
        return _onnx().dynamic_input(path)
    except MissingFeature:
        return None


def import_onnx(path: str, input_shape=None):
    return _onnx().load_onnx(path, input_shape)


def measure(design, settings, cancel=None) -> dict:
    """Run the design for real with PyTorch, in a child process (torch is never imported into the
    window's process: that froze it for seconds); returns {'peak_bytes': int, 'timeline': [bytes,
    ...], 'timeline_phases', 'device': 'cpu' | 'cuda', 'snapshot': PyTorch's memory snapshot on
    CUDA, else None, ...}. ``cancel`` (a threading.Event) kills the run."""
    from memdesigner.measure.isolated import measure_isolated

    try:
        return measure_isolated(design, settings, cancel=cancel)
    except ImportError as err:
        raise MissingFeature(f"Measuring needs PyTorch ({err}). Install it: pip install 'memdesigner[torch]'") from None
