"""Loading what the PyTorch importer imports: a factory in a user's .py file (run fresh each
time) and the module it builds, on the meta device where it can."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from memdesigner.importers._torch_values import TorchImportError


def _check_shape(shape, target: str) -> tuple:
    if not isinstance(shape, (tuple, list)) or not shape or \
            any(isinstance(d, bool) or not isinstance(d, int) or d <= 0 for d in shape):
        raise TorchImportError(f"{target}: the factory's input shape {str(shape)[:80]} is not a tuple of "
                               "positive integers")
    return tuple(shape)


def _fresh_module(p: Path):
    """Run the file's current source as a new module every time: a re-import after an edit must
    see the edit, so neither a module cached in sys.modules nor __pycache__ bytecode (keyed on
    the file's mtime in whole seconds and its size, so an edit within the same second that keeps
    the size would be missed) is used."""
    mod_name = f"_memdesigner_user_{abs(hash(str(p.resolve())))}"
    spec = importlib.util.spec_from_file_location(mod_name, str(p))
    mod = importlib.util.module_from_spec(spec)
    code = compile(p.read_bytes(), str(p), "exec", dont_inherit=True)
    sys.path.insert(0, str(p.parent.resolve()))
    try:
        sys.modules[mod_name] = mod  # dataclasses and pickling look the module up by name
        exec(code, mod.__dict__)  # noqa: S102 - importing a model file runs it (documented)
    except Exception:
        sys.modules.pop(mod_name, None)
        raise
    finally:
        try:
            sys.path.remove(str(p.parent.resolve()))
        except ValueError:
            pass
    return mod


def _model_class(mod, source: str):
    """The file's model among the nn.Module classes it defines: one no other of them uses (the
    blocks, heads and helpers a model is made of are named inside its class), constructible with
    no arguments, the last defined when several are; None when the file defines none."""
    import ast
    import inspect

    import torch

    mod_name = mod.__name__
    classes = [obj for obj in vars(mod).values()
               if isinstance(obj, type) and issubclass(obj, torch.nn.Module) and obj.__module__ == mod_name]
    if not classes:
        return None
    used: set[str] = set()
    try:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef):
                inner = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | \
                        {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
                used |= inner - {node.name}
    except SyntaxError:  # (exec accepted it: a parser difference) every class stays a candidate
        pass

    def no_args(cls) -> bool:
        try:
            params = list(inspect.signature(cls).parameters.values())
        except (TypeError, ValueError):
            return True
        return all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params)

    for pool in ([c for c in classes if c.__name__ not in used and no_args(c)],
                 [c for c in classes if no_args(c)], classes):
        if pool:
            return pool[-1]  # vars() keeps definition order: the model usually comes last
    return None


def load_factory(target: str):
    """Resolve "FILE.py:FACTORY" to the factory callable; "FILE.py" alone takes the file's model
    class (``_model_class``: the nn.Module class no other one uses, built with no arguments)."""
    if ":" in target and not Path(target).exists():
        path, fname = target.rsplit(":", 1)
    else:
        path, fname = target, None
    p = Path(path)
    if not p.exists():
        raise TorchImportError(f"{path}: no such file")
    mod = _fresh_module(p)
    if fname is None:
        cls = _model_class(mod, p.read_text(errors="replace"))
        if cls is None:
            raise TorchImportError(f"{path}: defines no nn.Module class; name a factory as FILE.py:FACTORY")
        return cls
    fn = getattr(mod, fname, None)
    if fn is None and hasattr(mod, "MODELS"):
        fn = mod.MODELS.get(fname)
    if fn is None or not callable(fn):
        raise TorchImportError(f"{path}: no factory {fname!r}")
    return fn


def build_module(fn, meta: bool = True):
    """Call a factory (returning a module or ``(module, input_shape)``) on the meta device, so that
    big weights cost no memory; a constructor that needs real data there (RegNet's ``.tolist()``
    on a computed tensor) is built again on the CPU. Returns (module, input_shape or None)."""
    import torch

    built = None
    if meta:
        try:
            with torch.device("meta"):
                built = fn()
        except Exception:  # noqa: BLE001 - any data-dependent constructor: build it for real
            built = None
    if built is None:
        built = fn()
    if isinstance(built, tuple):
        if len(built) != 2:
            raise TorchImportError(f"the factory returned a tuple of {len(built)}; expected (module, input_shape)")
        module, shape = built
        return module, (tuple(shape) if isinstance(shape, (tuple, list)) else shape)
    return built, None


def _all_on_meta(torch, module) -> None:
    """A module built on the meta device with a tensor some constructor put on the CPU anyway
    (``nn.Parameter(torch.Tensor(n).uniform_())``: the legacy constructor ignores the device
    context; Wav2Vec2's masked_spec_embed) goes wholly to meta: a CPU tensor among meta ones fails
    every op that mixes them ("weight is on meta, different from other tensors on cpu")."""
    tensors = list(module.parameters()) + list(module.buffers())
    if any(t.device.type == "meta" for t in tensors) and any(t.device.type != "meta" for t in tensors):
        module.to("meta")


def load_factory_module(target: str, meta: bool = True):
    """Build the module of "FILE.py:FACTORY" (on the meta device by default, see build_module)."""
    fn = load_factory(target)
    try:
        module, shape = build_module(fn, meta)
    except TorchImportError as err:
        raise TorchImportError(f"{target}: {err}") from None
    name = type(module).__name__  # the model's class, not the factory that made it ("make")
    return module, shape, name
