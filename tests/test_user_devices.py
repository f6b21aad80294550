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
