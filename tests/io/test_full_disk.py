"""A full disk (ENOSPC after some bytes) while a command writes its output: the old file stays
byte for byte, the user gets one line naming the output, exit 2, and no temporary file is left.
The disk is simulated at the atomic-write helper's one write seam; benchmarks/full_disk.py does
the same against a real 64 KiB tmpfs."""

import errno
import os

import pytest
from helpers import EXAMPLES, ROOT

from memdesigner.cli import main
from memdesigner.io import atomic_write
from memdesigner.io.atomic_write import write_atomic
from memdesigner.io.design_file import load_design, save_design

OLD = b"the old output, which a failed write must leave exactly as it was\n" * 100
LENET = str(EXAMPLES / "lenet5.json")
KERAS = str(ROOT / "resources" / "fixtures" / "functional_small.keras2.json")
HF = str(EXAMPLES / "hf" / "bert-base-uncased.json")
TORCH_MODEL = "import torch\n\ndef make():\n    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())\n"


@pytest.fixture
def disk_full_after(monkeypatch):
    """``disk_full_after(n)``: the next writes get ENOSPC once n bytes in all are out (a short
    write first, as a real disk does)."""
    def arm(limit: int):
        left = [limit]

        def chunk(fd, data):
            if left[0] <= 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            n = os.write(fd, data[: left[0]])
            left[0] -= n
            return n

        monkeypatch.setattr(atomic_write, "_write_chunk", chunk)
    return arm


def _onnx_file(tmp_path) -> str:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def _torch_file(tmp_path) -> str:
    pytest.importorskip("torch")
    (tmp_path / "model.py").write_text(TORCH_MODEL)
    return f"{tmp_path / 'model.py'}:make"


COMMANDS = {
    "report_html": (lambda tmp, out: ["report", LENET, "--no-graph", "--no-max-batch", "-o", out], "r.html"),
    "report_md": (lambda tmp, out: ["report", LENET, "--no-graph", "--no-max-batch", "-o", out], "r.md"),
    "export_torch": (lambda tmp, out: ["export", "torch", LENET, "-o", out], "m.py"),
    "export_snapshot": (lambda tmp, out: ["export", "snapshot", LENET, "-o", out], "s.pickle"),
    "render": (lambda tmp, out: ["render", LENET, "-o", out], "w.png"),
    "import_keras": (lambda tmp, out: ["import", "keras", KERAS, "-o", out], "d.json"),
    "import_hf": (lambda tmp, out: ["import", "hf", HF, "--seq-len", "16", "-o", out], "d.json"),
    "import_onnx": (lambda tmp, out: ["import", "onnx", _onnx_file(tmp), "-o", out], "d.json"),
    "import_torch": (lambda tmp, out: ["import", "torch", _torch_file(tmp), "--input-shape", "4", "-o", out],
                     "d.json"),
}


@pytest.mark.parametrize("cmd", sorted(COMMANDS))
def test_a_full_disk_keeps_the_old_output_and_says_so_in_one_line(cmd, tmp_path, capsys, disk_full_after):
    if cmd == "render":
        pytest.importorskip("PySide6")
    argv, name = COMMANDS[cmd]
    out = tmp_path / "out" / name
    out.parent.mkdir()
    out.write_bytes(OLD)
    args = argv(tmp_path, str(out))
    disk_full_after(256)  # a short write, then ENOSPC (every output here is longer)
    code = main(args)
    stdout, err = capsys.readouterr()
    assert code == 2, (stdout, err)
    assert out.read_bytes() == OLD
    assert err.splitlines() == [f"memdesigner: error: {out}: cannot write: No space left on device"], err
    assert sorted(p.name for p in out.parent.iterdir()) == [name]  # no temporary file left


def test_markdown_pictures_beside_the_report_are_kept_too(tmp_path, capsys, disk_full_after):
    out = tmp_path / "r.md"
    assert main(["report", LENET, "--no-graph", "--no-max-batch", "--images", "files", "-o", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert len(before) >= 2  # the report and its timeline picture
    disk_full_after(0)
    assert main(["report", str(EXAMPLES / "resnet18.json"), "--no-graph", "--no-max-batch", "--images", "files",
                 "-o", str(out)]) == 2
    capsys.readouterr()
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


@pytest.mark.parametrize("limit", [0, 1, 100, 4096])
def test_the_helper_removes_its_temporary_file_and_keeps_the_old_one(tmp_path, disk_full_after, limit):
    path = tmp_path / "f.bin"
    path.write_bytes(OLD)
    disk_full_after(limit)
    with pytest.raises(OSError) as got:
        write_atomic(path, b"x" * 10_000)
    assert got.value.errno == errno.ENOSPC
    assert path.read_bytes() == OLD
    assert os.listdir(tmp_path) == ["f.bin"]


def test_a_design_save_on_a_full_disk_keeps_the_old_design(tmp_path, disk_full_after):
    path = tmp_path / "d.json"
    old = load_design(LENET)
    save_design(old, path)
    before = path.read_bytes()
    disk_full_after(1000)
    with pytest.raises(OSError):
        save_design(load_design(str(EXAMPLES / "resnet18.json")), path)
    assert path.read_bytes() == before and load_design(path).name == old.name
    assert os.listdir(tmp_path) == ["d.json"]


def test_a_short_write_is_not_an_error(tmp_path, monkeypatch):
    """os.write may write less than asked without failing: the rest follows."""
    monkeypatch.setattr(atomic_write, "_write_chunk", lambda fd, data: os.write(fd, data[:7]))
    write_atomic(tmp_path / "f", b"0123456789" * 30)
    assert (tmp_path / "f").read_bytes() == b"0123456789" * 30


def test_python_m_memdesigner_cli_errors_are_one_line_too(tmp_path):
    """``python -m memdesigner.cli`` runs cli/__main__.py: the subcommands' CliError (from the
    imported memdesigner.cli) must still be caught there, not end in a traceback."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "memdesigner.cli", "report", LENET, "--no-graph", "-o",
                        str(tmp_path / "no" / "r.html")], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 2, r.stderr
    assert r.stderr.splitlines() == [f"memdesigner: error: {tmp_path / 'no' / 'r.html'}: cannot write: folder "
                                     f"{tmp_path / 'no'} does not exist"]


def test_a_failed_headless_render_is_one_line_without_qt_noise(tmp_path):
    """The offscreen platform's "does not support propagateSizeHints()" warning came before the
    error on every headless render that failed after the window was drawn."""
    pytest.importorskip("PySide6")
    import subprocess
    import sys

    out = tmp_path / "w.notapicture"
    r = subprocess.run([sys.executable, "-m", "memdesigner.cli", "render", LENET, "-o", str(out)],
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYTHONPATH=str(ROOT), QT_QPA_PLATFORM="offscreen"))
    assert r.returncode == 2, r.stderr
    assert r.stderr.splitlines() == [f"memdesigner: error: {out}: cannot write: Qt could not save the image "
                                     "(name it .png)"]
    assert os.listdir(tmp_path) == []
