"""Hostile memory snapshots (issue 22): memo bombs, deep tuples, huge numbers, odd frames and
special files are refused in one line, quickly and in little memory, or read as far as they
make sense. The cases are benchmarks/fuzz_snapshot.py's; a fixed sample of that fuzzer runs here."""

import os
import pickle
import struct
import subprocess
import sys
import time

import pytest
from helpers import ROOT

from memdesigner.cli import main
from memdesigner.snapshot import SnapshotError, load_snapshot, loads_snapshot, replay

sys.path.insert(0, str(ROOT / "benchmarks"))
import fuzz_snapshot  # noqa: E402
from _fuzz_run import good, run_argv  # noqa: E402


def _show(tmp_path, capsys, data: bytes, name="s.pickle"):
    p = tmp_path / name
    p.write_bytes(data)
    t = time.perf_counter()
    rc = main(["snapshot", "show", str(p)])
    dt = time.perf_counter() - t
    err = capsys.readouterr().err
    return rc, err, dt


def _snap(trace, segments=()):
    return pickle.dumps({"segments": list(segments), "device_traces": [trace]}, protocol=4)


def test_memo_bomb_is_refused_by_the_events_it_builds(tmp_path, capsys):
    """520 KB: one 10^4-event list named by 4,000 devices is 4 * 10^7 events to walk (the issue's
    10^4 devices, 10^8 events, ran over 60 s; more than 4,096 devices is refused by itself)."""
    trace = [fuzz_snapshot._ev(i) for i in range(10_000)]
    data = pickle.dumps({"segments": [], "device_traces": [trace] * 4000}, protocol=4)
    assert len(data) < 600_000
    rc, err, dt = _show(tmp_path, capsys, data)
    assert rc == 2 and err.count("\n") == 1 and dt < 1.0
    assert "40,000,000 trace events" in err and "MEMDESIGNER_MAX_SNAPSHOT_EVENTS" in err


def test_events_limit_can_be_raised_and_lowered(tmp_path, capsys, monkeypatch):
    trace = [fuzz_snapshot._ev(i) for i in range(10)]
    data = pickle.dumps({"segments": [], "device_traces": [trace, trace]}, protocol=4)
    monkeypatch.setenv("MEMDESIGNER_MAX_SNAPSHOT_EVENTS", "19")
    rc, err, _ = _show(tmp_path, capsys, data)
    assert rc == 2 and "20 trace events" in err and "limit is 19" in err
    monkeypatch.setenv("MEMDESIGNER_MAX_SNAPSHOT_EVENTS", "20")
    rp = replay(loads_snapshot(data))
    # device 0 (ties: the lowest index): ten 512 B allocations, none freed
    assert rp.device == 0 and list(rp.allocated) == [512 * k for k in range(1, 11)]


def test_shared_frame_and_block_lists_count_each_use(tmp_path, capsys):
    fr = [fuzz_snapshot._frame()] * 10_000
    rc, err, dt = _show(tmp_path, capsys, _snap([fuzz_snapshot._ev(i, fr) for i in range(10_000)]))
    assert rc == 2 and "50,010,000 stack frames" in err and "MEMDESIGNER_MAX_SNAPSHOT_FRAMES" in err and dt < 1.0
    blocks = [{"size": 512, "state": "active_allocated", "address": i} for i in range(5000)]
    segs = [{"device": 0, "address": 0, "total_size": 2 << 20, "blocks": blocks}] * 5000
    rc, err, dt = _show(tmp_path, capsys, pickle.dumps({"segments": segs, "device_traces": []}, protocol=4))
    assert rc == 2 and "5,001,000 segments and blocks" in err and "MEMDESIGNER_MAX_SNAPSHOT_BLOCKS" in err
    assert dt < 1.0


@pytest.mark.parametrize("field,value", [("size", 2**20000), ("size", -1), ("size", 2**63), ("addr", [1]),
                                         ("addr", 1.5), ("time_us", float("nan")), ("time_us", 2**70)],
                         ids=["size-2^20000", "size-neg", "size-2^63", "addr-list", "addr-float", "time-nan",
                              "time-2^70"])
def test_event_fields_out_of_range_are_one_line(tmp_path, capsys, field, value):
    e = fuzz_snapshot._ev(1)
    e[field] = value
    rc, err, _ = _show(tmp_path, capsys, _snap([e]))
    assert rc == 2 and err.count("\n") == 1 and "device 0 event 0" in err and field.split("_")[0] in err


def test_none_and_odd_frames_are_read_as_no_frame(tmp_path):
    """A None frame gave AttributeError; the replay reads the frames it can (the second is the
    user's line) and names the rest by what they lack."""
    ok = {"filename": "/home/u/train.py", "line": 7, "name": "forward"}
    events = [fuzz_snapshot._ev(0, [None, ok], size=1024), fuzz_snapshot._ev(1, [{"filename": ["a"], "line": "x"}])]
    rp = replay(loads_snapshot(_snap(events)))
    assert list(rp.allocated) == [1024, 1536]
    assert rp.top_at_peak == [("train.py:7 forward", 1024), (":0 ", 512)]


def test_huge_pickle_lengths_are_one_line(tmp_path, capsys):
    for op in (b"\x8e", b"\x8d", b"\x96"):  # BINBYTES8, BINUNICODE8, BYTEARRAY8
        for ln in (2**63, 7305979392150562165):
            rc, err, _ = _show(tmp_path, capsys, b"\x80\x04" + op + struct.pack("<Q", ln) + b"xx.")
            assert rc == 2 and err.count("\n") == 1, err
            assert "not a PyTorch memory snapshot pickle" in err


def test_deep_tuple_key_does_not_crash_the_process(tmp_path):
    """A 1 MB dict key nested a million deep: its hash recursed in C past the 8 MiB stack
    (SIGSEGV, exit -11). In a child process, so that a regression fails here, not the suite."""
    p = tmp_path / "deep.pickle"
    for op in (b"\x85", b"t"):
        p.write_bytes(fuzz_snapshot._deep_key(1_000_000, op))
        code = f"from memdesigner.cli import main; raise SystemExit(main(['snapshot', 'show', {str(p)!r}]))"
        r = subprocess.run([sys.executable, "-c", code], capture_output=True,
                           text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert r.returncode == 2 and r.stderr.count("\n") == 1, (r.returncode, r.stderr[-300:])
        assert "no 'segments' or 'device_traces'" in r.stderr


def test_special_files_are_refused_without_reading(tmp_path, capsys):
    fifo = tmp_path / "fifo.pickle"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.pickle"
    zero.symlink_to("/dev/zero")
    for p in (fifo, zero, tmp_path):
        t = time.perf_counter()
        with pytest.raises(SnapshotError, match="cannot read"):
            load_snapshot(p)
        assert time.perf_counter() - t < 1.0
    assert main(["snapshot", "show", str(fifo)]) == 2
    assert "not a regular file" in capsys.readouterr().err


def test_file_size_limit(tmp_path, monkeypatch):
    p = tmp_path / "s.pickle"
    p.write_bytes(_snap([fuzz_snapshot._ev(i) for i in range(200_000)]))
    monkeypatch.setenv("MEMDESIGNER_MAX_SNAPSHOT_MB", "1")
    with pytest.raises(SnapshotError, match="bytes is too big .*MEMDESIGNER_MAX_SNAPSHOT_MB"):
        load_snapshot(p)


def test_cancel_stops_a_long_read(tmp_path):
    import threading

    from memdesigner.snapshot.reader import SnapshotCancelled
    from memdesigner.snapshot.replay import open_replay

    p = tmp_path / "s.pickle"
    p.write_bytes(_snap([fuzz_snapshot._ev(i) for i in range(1000)]))
    ev = threading.Event()
    ev.set()
    with pytest.raises(SnapshotCancelled):
        open_replay(p, cancel=ev)


def test_fuzz_sample(tmp_path):
    """60 cases of benchmarks/fuzz_snapshot.py (every family, hostile ones included)."""
    path = tmp_path / "snap.pickle"
    bad = []
    for fam, what, data in fuzz_snapshot.cases(60, seed=5):
        if "1000000 deep" in what:
            continue  # the child-process test above
        path.write_bytes(data)
        r = run_argv(["snapshot", "show", str(path)], fam, what, time_limit=10)
        if not good(r) or r.seconds > 2:
            bad.append(f"{what}: {r.kind} {r.seconds:.2f} s {r.err[-200:]!r}")
    assert not bad, bad


def test_exact_depth_when_the_bound_is_beyond_any_stack(monkeypatch):
    """The byte-count bound of a real file is large (every SETITEMS has a MARK): past MAX_STACK
    the pickle is walked for its real depth, which is 0 for a snapshot (no tuples)."""
    import io

    from memdesigner.snapshot import pickle_depth

    data = _snap([dict(fuzz_snapshot._ev(i), stream_name=f"t{i}") for i in range(3000)])  # 3,000 't' bytes too

    assert pickle_depth.depth_bound(io.BytesIO(data)) >= 3000 and pickle_depth.exact_depth(io.BytesIO(data)) == 0
    assert pickle_depth.exact_depth(io.BytesIO(fuzz_snapshot._deep_key(500, b"t"))) == 500
    assert pickle_depth.exact_depth(io.BytesIO(fuzz_snapshot._deep_key(700))) == 700
    monkeypatch.setattr(pickle_depth, "MAX_STACK", 1 << 20)
    walked = []
    real = pickle_depth.exact_depth
    monkeypatch.setattr(pickle_depth, "exact_depth", lambda f: walked.append(1) or real(f))
    assert len(loads_snapshot(data)["device_traces"][0]) == 3000 and walked == [1]
    with pytest.raises(SnapshotError, match="tuples nested 50,000 deep"):
        loads_snapshot(fuzz_snapshot._deep_key(50_000))


def test_segment_sizes_that_overflow_int64_are_one_line(tmp_path, capsys):
    """40,000 segments of 2^48 bytes: their sum (2^63.3) overflowed the replay's int64 (traceback)."""
    segs = [{"device": 0, "address": i, "total_size": 2**48,
             "blocks": [{"size": 2**48, "state": "active_allocated", "address": i}]} for i in range(40_000)]
    rc, err, _ = _show(tmp_path, capsys, pickle.dumps({"segments": segs, "device_traces": [[fuzz_snapshot._ev(1)]]},
                                                      protocol=4))
    assert rc == 2 and err.count("\n") == 1 and "add up to more than 2^62 bytes" in err
    segs = segs[:2]  # the control: 2^49 reserved, 2^49 + 512 allocated at the peak
    rp = replay(loads_snapshot(pickle.dumps({"segments": segs, "device_traces": [[fuzz_snapshot._ev(1)]]})))
    assert rp.peak_reserved == 2**49 and rp.peak_allocated == 2**49 and rp.initial_allocated == 2**49 - 512
