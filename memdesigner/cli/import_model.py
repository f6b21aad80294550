"""`memdesigner import torch|keras|onnx|hf ... -o DESIGN.json`: a model people have, as a design."""

from __future__ import annotations

import sys

from memdesigner.cli.common import CliError, Parser, save, writable
from memdesigner.cli.import_hf import add_parser as add_hf_parser
from memdesigner.cli.import_hf import design_for_cli


def add_parser(sub) -> None:
    imp = sub.add_parser("import", help="import a model (torch FILE.py:FACTORY, keras MODEL.json, onnx MODEL.onnx)")
    isub = imp.add_subparsers(dest="source", parser_class=Parser)
    ik = isub.add_parser("keras", help="Keras model.to_json() output")
    ik.add_argument("model")
    ik.add_argument("-o", "--output", required=True)
    it = isub.add_parser("torch", help="a Python file with a factory returning an nn.Module (runs the file)",
                         description="Importing RUNS the file's Python code (in a child process, with a time "
                                     "limit): import only files you trust.")
    it.add_argument("spec", help="FILE.py:FACTORY")
    it.add_argument("-o", "--output", required=True)
    it.add_argument("--input-shape", default=None, help="per-sample shape, e.g. 3,224,224")
    it.add_argument("--input-dtype", default=None, choices=("float", "int64"))
    it.add_argument("--timeout", type=float, default=300.0, help="seconds the model code may run (default 300)")
    io_ = isub.add_parser("onnx", help="an ONNX model file (needs pip install memdesigner[onnx])")
    io_.add_argument("model", help="MODEL.onnx")
    io_.add_argument("-o", "--output", required=True)
    io_.add_argument("--input-shape", default=None, help="per-sample shape, e.g. 3,224,224 (default: the graph's)")
    add_hf_parser(isub, Parser)


def run(args) -> int:
    writable(args.output)
    if args.source == "keras":
        from memdesigner.importers.keras_json import load_keras_json

        try:
            design = load_keras_json(args.model)
        except (OSError, ValueError, KeyError) as err:
            raise CliError(f"{args.model}: {err}") from None
    elif args.source == "torch":
        from memdesigner.importers.torch_isolated import import_file_isolated, parse_input_shape

        try:  # the file runs in a child process: it cannot exit, hang or chdir this one
            design = import_file_isolated(args.spec, parse_input_shape(args.input_shape), args.input_dtype,
                                          timeout=args.timeout)
        except ImportError as err:
            raise CliError(f"PyTorch import needs torch installed (pip install memdesigner[torch]): {err}") from None
        except ValueError as err:
            raise CliError(str(err)) from None
    elif args.source == "onnx":
        from memdesigner.importers.onnx_import import OnnxImportError, import_for_cli

        try:
            design = import_for_cli(args)
        except OnnxImportError as err:
            raise CliError(str(err)) from None
    elif args.source == "hf":
        try:
            design = design_for_cli(args)
        except ValueError as err:
            raise CliError(str(err)) from None
    else:
        raise CliError("import needs a source: torch, keras, onnx or hf")
    save(design, args.output)
    for w in getattr(design, "import_warnings", []):
        sys.stderr.write(f"memdesigner: warning: {w}\n")
    print(args.output)
    return 0
