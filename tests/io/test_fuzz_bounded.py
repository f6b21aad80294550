"""A fixed sample of benchmarks/fuzz_bounded.py: devices.json, Keras JSON (hostile files
included) and nested-block designs; every case ends in exit 0 with one-line warnings or exit 2
with one error line, within its time limit."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import _fuzz  # noqa: E402
import fuzz_bounded  # noqa: E402


@pytest.mark.parametrize("target, n", [("devices", 60), ("keras", 50), ("blocks", 40)])
def test_sample(target, n):
    tally = _fuzz.Tally()
    fuzz_bounded.TARGETS[target](n, 22, 20.0, tally)
    assert not tally.bad, "\n".join(tally.bad[:5])
    rows = tally.rows.values()
    assert sum(r["cases"] for r in rows) == n
    assert sum(r["exit 2"] for r in rows) >= n // 10  # the sample does exercise refusals (devices: estimate only)
    if target != "blocks":
        assert any(f.startswith("hostile:") for f in tally.rows)


def test_the_classifier_catches_what_it_must():
    ok = _fuzz.Result(2, "memdesigner: warning: w\nmemdesigner: error: e\n", 0.1, 1)
    assert _fuzz.outcome(ok) == "ok"
    assert _fuzz.outcome(_fuzz.Result(2, "memdesigner: error: a\nb\n", 0.1, 1)) == "multi-line error"
    assert _fuzz.outcome(_fuzz.Result(0, "Traceback\n", 0.1, 1)) == "multi-line warning"
    assert _fuzz.outcome(_fuzz.Result("TypeError", "", 0.1, 1)) == "traceback TypeError"
    assert _fuzz.outcome(_fuzz.Result("hang", "", 0.1, 1)) == "hang"
    assert _fuzz.outcome(_fuzz.Result(1, "", 0.1, 1)) == "exit 1"


def test_a_case_past_its_time_limit_is_a_hang(monkeypatch):
    import time

    from memdesigner import cli

    monkeypatch.setattr(cli, "main", lambda argv: time.sleep(5))
    res = _fuzz.run_main(["devices"], limit_s=0.2)
    assert res.code == "hang" and res.seconds < 2
