"""The devices people buy now (issue 21): each profile with the memory its runtime reports
(nvidia-smi's total, rocminfo's pool, Metal's working-set limit) and where that figure came
from in ``notes``. Read from the repository's resources/devices.json itself."""

import json
from pathlib import Path

import pytest

from memdesigner.engine.device_profile import device_from_dict

MiB, GiB = 2**20, 2**30
FILE = Path(__file__).resolve().parents[2] / "resources" / "devices.json"


@pytest.fixture(scope="module")
def devs():
    return {d["id"]: d for d in json.loads(FILE.read_text())["devices"]}


@pytest.mark.parametrize("dev_id, memory, source", [
    ("b200", 183359 * MiB, "nvidia-smi total 183359 MiB"),
    ("gb200", 189471 * MiB, "nvidia-smi total 189471 MiB"),
    ("h20", 97871 * MiB, "nvidia-smi total 97871 MiB"),
    ("rtx5090", 32607 * MiB, "nvidia-smi total 32607 MiB"),
    ("rtx-pro-6000-blackwell", 97887 * MiB, "nvidia-smi total 97887 MiB"),
    ("mi300x", 206_141_652_992, "rocminfo"),
    ("mi325x", 256 * GiB - 16 * MiB, "by analogy"),
    ("apple-m3-max-36gb", 36 * GiB, "recommendedMaxWorkingSetSize"),
    ("apple-m4-max-64gb", 64 * GiB, "recommendedMaxWorkingSetSize"),
    ("apple-m4-max-128gb", 128 * GiB, "recommendedMaxWorkingSetSize"),
])
def test_current_devices_with_runtime_memory_and_sources(devs, dev_id, memory, source):
    d = devs[dev_id]
    assert d["memory_bytes"] == memory
    assert source in d["notes"] and "runtime_overhead_bytes" in d["notes"]
    dev = device_from_dict(d)
    assert dev.kind == ("mps" if dev_id.startswith("apple") else "cuda")  # ROCm runs through torch.cuda
    assert dev.allocator_rounding == (1 if dev.kind == "mps" else 512)
    assert 0 < dev.usable_bytes < dev.memory_bytes
    assert dev.peak_flops["bf16"] >= dev.peak_flops["fp32"] > 1e12
