"""User-defined device profiles sit beside the shipped ones and drive the fit verdict."""

import json

import pytest
from helpers import EXAMPLES

from memdesigner.cli import main
from memdesigner.engine import devices


@pytest.fixture
def user_file(tmp_path, monkeypatch):
    path = tmp_path / "devices.json"
    monkeypatch.setattr(devices, "user_devices_path", lambda: path)
    return path


def test_user_profile_is_listed_and_used(user_file, capsys):
    devices.save_user_devices([devices.Device("lab-gpu-2g", "Lab GPU 2 GiB", "cuda", 2 * 2**30,
                                              runtime_overhead_bytes=300 * 2**20)])
    assert json.loads(user_file.read_text())["devices"][0]["id"] == "lab-gpu-2g"
    ids = [d.id for d in devices.all_devices()]
    assert "lab-gpu-2g" in ids and "rtx3080-10gb" in ids
    assert main(["estimate", str(EXAMPLES / "resnet18.json"), "--mode", "train", "--batch", "128",
                 "--device", "lab-gpu-2g", "--max-batch", "--format", "json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["device"]["id"] == "lab-gpu-2g" and r["device"]["fits"] is False
    assert 0 < r["max_batch"] < 128
    assert main(["devices"]) == 0
    assert "(user)" in capsys.readouterr().out


def test_broken_user_file_does_not_hide_shipped_profiles(user_file):
    user_file.write_text("{not json")
    assert len(devices.all_devices()) == len(devices.shipped_devices())


GOOD = {"id": "lab-gpu", "name": "Lab GPU", "kind": "cuda", "memory_bytes": 2 * 2**30}

# whole-file problems: no user device, shipped profiles intact, one line naming the file
BAD_FILES = {
    "devices_not_list": ('{"devices": 5}', "devices: expected a list of device objects, got int"),
    "top_level_list": (f'[{json.dumps(GOOD)}]', "(top level): expected an object"),
    "invalid_json": ('{"devices": [', "invalid JSON"),
    "not_utf8": (b'{"devices": [{"id": "caf\xe9", "memory_bytes": 1}]}', "not UTF-8 text (byte 0xe9 at offset 24)"),
}

# bad entries beside a good one: the good one is kept, each bad one named by index, id and field
BAD_ENTRIES = {
    "null": ("null", "devices[1]: None is not of type 'object'"),
    "overflow": ('{"id": "huge", "memory_bytes": 1e400}', "devices[1] (id 'huge'): memory_bytes: inf is not of type 'integer'"),
    "negative": ('{"id": "neg", "memory_bytes": -1}', "devices[1] (id 'neg'): memory_bytes: -1 is less than the minimum of 1"),
    "zero": ('{"id": "z", "memory_bytes": 0}', "devices[1] (id 'z'): memory_bytes: 0 is less than the minimum of 1"),
    "bool": ('{"id": "b", "memory_bytes": true}', "devices[1] (id 'b'): memory_bytes: True is not of type 'integer'"),
    "missing_memory": ('{"id": "m"}', "devices[1] (id 'm'): 'memory_bytes' is a required property"),
    "bad_kind": ('{"id": "k", "kind": "tpu", "memory_bytes": 1000}', "devices[1] (id 'k'): kind: 'tpu' is not one of"),
    "typo_field": ('{"id": "t", "memory_bytes": 1000, "runtime_overhead": 5}', "devices[1] (id 't'): Additional properties"),
    "overhead_too_big": ('{"id": "o", "memory_bytes": 1000, "runtime_overhead_bytes": 1000}',
                         "devices[1] (id 'o'): runtime_overhead_bytes: 1000 is not below memory_bytes 1000"),
    "nan_bandwidth": ('{"id": "n", "memory_bytes": 1000, "bandwidth_bytes_per_s": NaN}',
                      "devices[1] (id 'n'): bandwidth_bytes_per_s: nan is not a finite number"),
    "shipped_id": ('{"id": "h200", "memory_bytes": 1000}', "devices[1] (id 'h200'): id: 'h200' is already used"),
    # the fuzzer's finds (benchmarks/fuzz_bounded.py): integers too large for a float were OverflowError tracebacks
    "memory_400_digits": ('{"id": "m4", "memory_bytes": 1' + "0" * 400 + "}",
                          "devices[1] (id 'm4'): memory_bytes: a number of about 400 digits is above the maximum 2^62"),
    "bandwidth_400_digits": ('{"id": "b4", "memory_bytes": 1000, "bandwidth_bytes_per_s": 1' + "0" * 400 + "}",
                             "devices[1] (id 'b4'): bandwidth_bytes_per_s: a number of about 400 digits is not a finite number"),
    "flops_2000_digits": ('{"id": "f4", "memory_bytes": 1000, "peak_flops": {"fp32": 1' + "0" * 2000 + "}}",
                          "devices[1] (id 'f4'): peak_flops.fp32: a number of about 2,000 digits is not a finite number"),
}


def _shipped_ids():
    return [d.id for d in devices.shipped_devices()]


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_user_file_is_one_line_and_keeps_shipped_devices(user_file, capsys, case):
    content, expected = BAD_FILES[case]
    user_file.write_bytes(content if isinstance(content, bytes) else content.encode())
    assert [d.id for d in devices.all_devices()] == _shipped_ids()
    problems = devices.device_file_problems()
    assert len(problems) == 1 and problems[0].startswith(f"{user_file}: ") and expected in problems[0], problems
    assert main(["devices"]) == 0
    out, err = capsys.readouterr()
    assert "h200" in out
    assert err == f"memdesigner: warning: {problems[0]}\n"
    assert main(["estimate", str(EXAMPLES / "resnet18.json"), "--device", "h200", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["device"]["id"] == "h200"


@pytest.mark.parametrize("case", sorted(BAD_ENTRIES))
def test_bad_entry_is_named_and_the_good_ones_kept(user_file, capsys, case):
    entry, expected = BAD_ENTRIES[case]
    user_file.write_text(f'{{"devices": [{json.dumps(GOOD)}, {entry}, {json.dumps(dict(GOOD, id="lab-2"))}]}}')
    assert [d.id for d in devices.all_devices()] == _shipped_ids() + ["lab-gpu", "lab-2"]
    problems = devices.device_file_problems()
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{user_file}: ") and expected in problems[0], problems
    assert problems[0].endswith("; entry skipped")
    assert main(["estimate", str(EXAMPLES / "resnet18.json"), "--device", "lab-2", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["device"]["id"] == "lab-2"
    assert err.splitlines() == [f"memdesigner: warning: {problems[0]}"]


def test_every_bad_entry_gets_its_own_line(user_file):
    user_file.write_text('{"devices": [null, {"id": "a", "memory_bytes": -1}, {"id": "b", "memory_bytes": 8}]}')
    assert [d.id for d in devices.user_devices()] == ["b"]
    assert [p.split(": ", 2)[1] for p in devices.device_file_problems()] == ["devices[0]", "devices[1] (id 'a')"]


def test_shipped_profiles_pass_the_user_entry_checks():
    """The user's checks are the shipped file's layout: every shipped entry passes them."""
    from memdesigner.engine.user_device_file import _entry_problem

    data = json.loads((EXAMPLES.parent / "devices.json").read_text())
    assert [(d["id"], _entry_problem(d, set())) for d in data["devices"] if _entry_problem(d, set())] == []
