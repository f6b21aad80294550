"""Every reader of a user file is bounded (io/bounded_read.py): a FIFO, a device, a file over
MEMDESIGNER_MAX_FILE_MB or one nested past MEMDESIGNER_MAX_JSON_DEPTH is one line naming the
file, the limit and the variable, at once and in little memory: for designs, devices.json and
Keras JSON alike."""

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers import unblock_fifo_later

from memdesigner.cli import main
from memdesigner.engine import devices
from memdesigner.io.bounded_read import BoundedReadError, parse_json, read_bytes

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "resources" / "examples" / "lenet5.json")
GOOD_DESIGN = {"format": "memdesigner-design", "version": 1, "name": "t",
               "nodes": [{"id": "in", "type": "Input", "props": {"shape": [8]}}], "edges": []}


@pytest.fixture
def user_file(tmp_path, monkeypatch):
    path = tmp_path / "devices.json"
    monkeypatch.setattr(devices, "user_devices_path", lambda: path)
    return path


def _fifo(path):
    os.mkfifo(path)
    stop = threading.Event()
    unblock_fifo_later(path, stop)  # an unbounded read would block: make it fail instead
    return stop


def test_a_fifo_is_refused_at_once(tmp_path):
    path = tmp_path / "x.json"
    stop = _fifo(path)
    try:
        with pytest.raises(BoundedReadError, match=r"x\.json: cannot read: a FIFO \(named pipe\), not a design file$"):
            read_bytes(path, "design file")
    finally:
        stop.set()


@pytest.mark.parametrize("make, expected", [
    (lambda p: p.symlink_to("/dev/null"), "cannot read: a character device, not a file"),
    (lambda p: p.mkdir(), "cannot read: a directory, not a file"),
    (lambda p: None, "cannot read: No such file or directory"),
], ids=["char-device", "directory", "missing"])
def test_what_is_not_a_regular_file_is_refused(tmp_path, make, expected):
    path = tmp_path / "x.json"
    make(path)
    with pytest.raises(BoundedReadError) as err:
        read_bytes(path)
    assert str(err.value) == f"{path}: {expected}"


def test_the_size_limit_names_the_variable(tmp_path, monkeypatch):
    path = tmp_path / "big.json"
    path.write_bytes(b" " * 2_000_001)
    monkeypatch.setenv("MEMDESIGNER_MAX_FILE_MB", "2")
    with pytest.raises(BoundedReadError) as err:
        read_bytes(path, "design file")
    assert str(err.value) == (f"{path}: cannot read: 2.0 MB, the 2 MB limit for a design file "
                              "(set MEMDESIGNER_MAX_FILE_MB to raise it)")
    monkeypatch.setenv("MEMDESIGNER_MAX_FILE_MB", "3")
    assert len(read_bytes(path)) == 2_000_001


def test_a_bad_limit_value_keeps_the_default(monkeypatch):
    from memdesigner.limits import limit

    for raw in ("", "0", "-5", "lots", "1e9"):
        monkeypatch.setenv("MEMDESIGNER_MAX_FILE_MB", raw)
        assert limit("FILE_MB") == 256
    monkeypatch.setenv("MEMDESIGNER_MAX_LAYERS", "2_000_000")
    assert limit("LAYERS") == 2_000_000


@pytest.mark.parametrize("depth", [65, 999, 100_000])
def test_json_nesting_is_refused_with_its_path(depth):
    text = '{"a": {"b": ' + "[" * (depth - 2) + "1" + "]" * (depth - 2) + "}}"  # the 1 is `depth` levels in
    with pytest.raises(BoundedReadError) as err:
        parse_json(text, "f.json")
    where = "" if depth > 990 else "a.b[0]: "  # past Python's recursion limit the parser stops first
    assert str(err.value) == f"f.json: {where}nested deeper than 64 levels (set MEMDESIGNER_MAX_JSON_DEPTH to raise it)"
    assert parse_json('{"a": {"b": ' + "[" * 62 + "1" + "]" * 62 + "}}", "f.json")  # 64 levels: fine


@pytest.mark.parametrize("text", ["1.5", '"x"', "NaN", "-Infinity", "null", "[]"])
def test_a_top_level_scalar_is_not_nested(text):
    """The fuzzer's find: the depth walk iterated a top-level number (TypeError in `devices`)."""
    assert parse_json(text, "f.json") == json.loads(text) or text == "NaN"


# -- devices.json -------------------------------------------------------------------------------

def _one_warning(capsys, expected: str, path) -> None:
    out, err = capsys.readouterr()
    assert err == f"memdesigner: warning: {path}: {expected}; no user devices loaded\n"


@pytest.mark.parametrize("make, expected", [
    (lambda p: p.symlink_to("/dev/null"), "cannot read: a character device, not a devices file"),
    (lambda p: p.write_text('{"devices": ' + "[" * 100_000 + "]" * 100_000 + "}"),
     "nested deeper than 64 levels (set MEMDESIGNER_MAX_JSON_DEPTH to raise it)"),
    (lambda p: p.write_text('{"devices": [{"id": "a", "memory_bytes": 1, "notes": ' + "[" * 200 + "]" * 200 + "}]}"),
     "devices[0].notes: nested deeper than 64 levels (set MEMDESIGNER_MAX_JSON_DEPTH to raise it)"),
], ids=["char-device", "nested-100000", "nested-200-in-an-entry"])
def test_hostile_devices_file_is_one_warning(user_file, capsys, make, expected):
    make(user_file)
    assert main(["devices"]) == 0
    _one_warning(capsys, expected, user_file)
    assert main(["estimate", EXAMPLE, "--device", "h200", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["device"]["id"] == "h200"
    assert err == f"memdesigner: warning: {user_file}: {expected}; no user devices loaded\n"


def test_a_devices_fifo_does_not_hang(user_file, capsys):
    stop = _fifo(user_file)
    try:
        assert main(["devices"]) == 0
    finally:
        stop.set()
    _one_warning(capsys, "cannot read: a FIFO (named pipe), not a devices file", user_file)


def test_devices_from_dev_zero_cost_little(tmp_path):
    """The finding: devices.json -> /dev/zero grew ``memdesigner devices`` until the kernel killed
    it. In a child (2 GB address-space cap, so the unbounded reader fails fast instead of eating
    the machine): one warning line, exit 0, well under 200 MB and a second."""
    cfg = tmp_path / "cfg" / "memdesigner"
    cfg.mkdir(parents=True)
    (cfg / "devices.json").symlink_to("/dev/zero")
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path / "cfg"), PYTHONPATH=str(ROOT))
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30));"
            "from memdesigner.engine.devices import device_file_problems as p; import time; t = time.process_time();"
            "lines = p(); dt = time.process_time() - t;"
            "print(len(lines), lines[0] if lines else '', dt, [int(x.split()[1]) for x in open('/proc/self/status') if x.startswith('VmHWM')][0])")
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-500:]
    n, rest = run.stdout.split(" ", 1)
    line, dt, rss_kb = rest.rsplit(" ", 2)
    assert n == "1" and line.endswith("cannot read: a character device, not a devices file; no user devices loaded")
    assert float(dt) < 1.0 and int(rss_kb) < 200_000


# -- designs and Keras JSON ---------------------------------------------------------------------

@pytest.mark.parametrize("cmd", [["estimate", "{p}"], ["import", "keras", "{p}", "-o", "{out}"]],
                         ids=["design", "keras"])
def test_design_and_keras_fifo_and_device(tmp_path, capsys, cmd):
    out = tmp_path / "out.json"
    what = "design file" if cmd[0] == "estimate" else "Keras model file"
    fifo = tmp_path / "fifo.json"
    stop = _fifo(fifo)
    dev = tmp_path / "null.json"
    dev.symlink_to("/dev/null")  # /dev/zero (the finding) only in the capped child above: unbounded, it eats the machine
    try:
        for path, kind in ((fifo, "a FIFO (named pipe)"), (dev, "a character device")):
            assert main([a.format(p=path, out=out) for a in cmd]) == 2
            err = capsys.readouterr().err
            prefix = f"memdesigner: error: {path}: " if cmd[0] == "estimate" else f"memdesigner: error: {path}: {path}: "
            assert err == f"{prefix}cannot read: {kind}, not a {what}\n"
    finally:
        stop.set()
    assert not out.exists()


def test_design_over_the_size_limit(tmp_path, capsys, monkeypatch):
    path = tmp_path / "big.json"
    path.write_text(json.dumps(dict(GOOD_DESIGN, description="x" * 1_500_000)))
    monkeypatch.setenv("MEMDESIGNER_MAX_FILE_MB", "1")
    assert main(["estimate", str(path)]) == 2
    assert capsys.readouterr().err == (f"memdesigner: error: {path}: cannot read: 1.5 MB, the 1 MB limit for a "
                                       "design file (set MEMDESIGNER_MAX_FILE_MB to raise it)\n")


def test_keras_zip_bomb_is_refused_before_inflating(tmp_path, capsys, monkeypatch):
    import zipfile

    path = tmp_path / "bomb.keras"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("config.json", b" " * 3_000_000)  # 3 MB of spaces: a 3 kB archive
    assert path.stat().st_size < 10_000
    monkeypatch.setenv("MEMDESIGNER_MAX_FILE_MB", "2")
    assert main(["import", "keras", str(path), "-o", str(tmp_path / "o.json")]) == 2
    assert capsys.readouterr().err == (f"memdesigner: error: {path}: {path}: config.json inflates to more than the "
                                       "2 MB limit (set MEMDESIGNER_MAX_FILE_MB to raise it)\n")
