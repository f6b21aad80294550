"""`memdesigner import torch` runs the model file in a child process: whatever the file does
(exit, crash, raise, loop, chdir, print), the CLI prints one stderr line and exits 2, or writes the
design exactly where -o says."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

from memdesigner.cli import main

MODEL = '''
import os
import sys

import torch.nn as nn

print("the module body prints")


def good():
    return nn.Sequential(nn.Linear(4, 3), nn.ReLU()), (4,)


def chatty():
    print("the factory prints to stdout")
    print("and to stderr", file=sys.stderr)
    return good()


def exit0():
    sys.exit(0)


def exit3():
    sys.exit(3)


def hard_exit():
    os._exit(0)


def raises():
    raise RuntimeError("the factory failed\\nwith a second line")


def spins():
    while True:
        pass


def moves():
    os.chdir(os.environ["MEMDESIGNER_TEST_ELSEWHERE"])
    return good()


def reads_env():
    return nn.Linear(int(os.environ["MEMDESIGNER_TEST_WIDTH"]), 2), (int(os.environ["MEMDESIGNER_TEST_WIDTH"]),)


def not_a_module():
    return 42, (4,)


class BadForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(5, 3)

    def forward(self, x):
        return self.fc(x)


def bad_forward():
    return BadForward(), (4,)


class NoTensor(nn.Module):
    def forward(self, x):
        return None


def no_tensor():
    return NoTensor(), (4,)


def float_shape():
    return nn.ReLU(), (2.5,)


def one_tuple():
    return (good()[0],)
'''


@pytest.fixture()
def model(tmp_path, monkeypatch):
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("MEMDESIGNER_TEST_ELSEWHERE", str(elsewhere))
    monkeypatch.chdir(tmp_path)
    return path


def _run(capsys, *argv):
    rc = main(["import", "torch", *argv])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


@pytest.mark.parametrize("factory,timeout,says", [
    ("exit0", 60, "called sys.exit(0)"),
    ("exit3", 60, "called sys.exit(3)"),
    ("hard_exit", 60, "ended the import process before it finished (it exited with code 0)"),
    ("raises", 60, "RuntimeError: the factory failed ..."),
    ("spins", 2, "did not finish within 2 s"),
    ("not_a_module", 60, "model.py:not_a_module: "),
    ("bad_forward", 60, "model.py:bad_forward: "),
    ("missing", 60, "no factory 'missing'"),
    ("no_tensor", 60, "NoTensor.forward returns no tensor (None)"),
    ("float_shape", 60, "the factory's input shape (2.5,) is not a tuple of positive integers"),
    ("one_tuple", 60, "the factory returned a tuple of 1; expected (module, input_shape)"),
])
def test_a_failing_model_file_gives_one_line_and_exit_2(model, capsys, factory, timeout, says):
    rc, out, err = _run(capsys, f"model.py:{factory}", "-o", "out.json", "--timeout", str(timeout))
    assert rc == 2
    assert len(err.splitlines()) == 1, err
    assert err.startswith("memdesigner: error: ") and says in err
    assert out == ""
    assert not (model.parent / "out.json").exists()


def test_prints_of_the_model_code_stay_out_of_the_cli_output(model, capsys):
    rc, out, err = _run(capsys, "model.py:chatty", "-o", "out.json")
    assert (rc, out, err) == (0, "out.json\n", "")
    d = json.loads((model.parent / "out.json").read_text())
    assert [n["type"] for n in d["nodes"]] == ["Input", "Linear", "ReLU"]


def test_chdir_in_the_factory_does_not_move_the_output(model, capsys):
    cwd = os.getcwd()
    rc, out, err = _run(capsys, "model.py:moves", "-o", "out.json")
    assert (rc, err) == (0, "")
    assert os.getcwd() == cwd
    assert (model.parent / "out.json").is_file()
    assert not (model.parent / "elsewhere" / "out.json").exists()


def test_the_model_code_sees_the_callers_environment_of_now(model, capsys, monkeypatch):
    """The child is forked from a server started at the first import; it still gets this call's
    environment (set after the server started)."""
    assert _run(capsys, "model.py:good", "-o", "first.json")[0] == 0  # the server runs now
    monkeypatch.setenv("MEMDESIGNER_TEST_WIDTH", "7")
    rc, out, err = _run(capsys, "model.py:reads_env", "-o", "out.json")
    assert (rc, err) == (0, "")
    d = json.loads((model.parent / "out.json").read_text())
    assert d["nodes"][0]["props"]["shape"] == [7]


@pytest.mark.parametrize("argv,says", [
    (["--input-shape=-1,4"], "--input-shape: '-1,4' needs 1 to 8 positive dimensions"),
    (["--input-shape", "0,4"], "needs 1 to 8 positive dimensions"),
    (["--input-shape", "3,,4"], "--input-shape: '3,,4' is not a list of integers"),
    (["--input-shape", "four"], "is not a list of integers"),
    (["--input-shape", ",".join(["2"] * 9)], "needs 1 to 8 positive dimensions"),
    (["--timeout", "0"], "--timeout: 0.0 is not a positive number of seconds"),
    (["--timeout", "nan"], "--timeout: nan is not a positive number of seconds"),
])
def test_bad_options_give_one_line(model, capsys, argv, says):
    rc, out, err = _run(capsys, "model.py:good", "-o", "out.json", *argv)
    assert rc == 2 and len(err.splitlines()) == 1 and says in err, err
    assert not (model.parent / "out.json").exists()


def test_the_real_cli_process_survives_sys_exit_0(model):
    r = subprocess.run([sys.executable, "-m", "memdesigner.cli", "import", "torch", "model.py:exit0", "-o", "out.json"],
                       cwd=model.parent, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2
    assert r.stderr.splitlines() == ["memdesigner: error: model.py:exit0: the model code called sys.exit(0)"]
    assert r.stdout == ""


def test_help_says_importing_runs_the_file(capsys):
    with pytest.raises(SystemExit):
        main(["import", "torch", "--help"])
    assert "RUNS the file's Python code" in capsys.readouterr().out


def test_a_calling_script_without_a_main_guard_runs_once(model):
    """multiprocessing would re-run the caller's __main__ script in the child; it must not."""
    script = model.parent / "caller.py"
    script.write_text("from memdesigner.importers.torch_isolated import import_file_isolated\n"
                      "print('script ran')\n"
                      "print(len(import_file_isolated('model.py:good').nodes))\n")
    r = subprocess.run([sys.executable, str(script)], cwd=model.parent, capture_output=True, text=True, timeout=300)
    assert (r.returncode, r.stdout, r.stderr) == (0, "script ran\n3\n", "")


def test_the_window_process_never_imports_torch(tmp_path):
    """The window's import and Measure with PyTorch (hooks) run torch only in child processes:
    importing torch in the window's own process held the GIL and froze it for seconds."""
    model = tmp_path / "m.py"
    model.write_text("import torch.nn as nn\n\ndef make():\n    return nn.Sequential(nn.Linear(4, 3)), (4,)\n")
    code = f"""
import sys
from memdesigner._qt import hooks
from memdesigner.engine.settings import Settings
d = hooks.import_torch({str(model) + ':make'!r})
r = hooks.measure(d, Settings(mode="train", optimizer="sgd", batch=2, backend="cpu"))
assert r["device"] == "cpu" and r["peak_bytes"] > 0, r
print(sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.")))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"
