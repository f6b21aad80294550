"""The shipped device profiles (resources/devices.json)."""

import json
from importlib import resources

import pytest

from memdesigner.engine.devices import KINDS, get_device, shipped_devices

GB = 10**9
GiB = 2**30


@pytest.fixture(scope="module")
def devices():
    return shipped_devices()


@pytest.fixture(scope="module")
def raw():
    return json.loads(resources.files("memdesigner.resources").joinpath("devices.json").read_text())["devices"]


def test_enough_profiles_with_unique_ids(devices):
    assert len(devices) >= 15
    ids = [d.id for d in devices]
    assert len(ids) == len(set(ids))


def test_every_profile_is_complete(raw):
    keys = {"id", "name", "kind", "memory_bytes", "runtime_overhead_bytes", "allocator_rounding",
            "bandwidth_bytes_per_s", "peak_flops", "notes"}
    for d in raw:
        assert keys <= set(d), d["id"]
        assert d["kind"] in KINDS, d["id"]
        assert isinstance(d["memory_bytes"], int) and d["memory_bytes"] > GiB, d["id"]
        assert 0 < d["runtime_overhead_bytes"] < d["memory_bytes"] // 2, d["id"]
        assert d["allocator_rounding"] == {"cuda": 512, "cpu": 1, "mps": 1}[d["kind"]], d["id"]
        assert d["bandwidth_bytes_per_s"] > 10 * GB, d["id"]
        assert set(d["peak_flops"]) == {"fp32", "fp16", "bf16"}, d["id"]
        assert all(v > 1e11 for v in d["peak_flops"].values()), d["id"]
        assert "memory_bytes" in d["notes"] and "runtime_overhead_bytes" in d["notes"], d["id"]


def test_required_ids_present(devices):
    ids = {d.id for d in devices}
    required = {"h200", "h100-80gb", "a100-40gb", "a100-80gb", "l40s", "l4", "a10g", "t4", "v100-16gb",
                "v100-32gb", "rtx4090", "rtx4080", "rtx3090", "rtx3080-10gb", "rtx3060-12gb", "rtx2080ti",
                "jetson-orin-nano-8gb", "cpu-16gb", "cpu-32gb", "cpu-64gb"}
    assert required <= ids
    assert any(d.kind == "mps" for d in devices)
    assert {d.kind for d in devices} == set(KINDS)


def test_rtx3080_has_about_10_gb():
    d = get_device("rtx3080-10gb")
    assert d.kind == "cuda"
    assert 9.5 * GB <= d.memory_bytes <= 11 * GB
    assert 9 * GiB < d.usable_bytes < d.memory_bytes


@pytest.mark.parametrize("dev_id, lo_gib, hi_gib", [
    ("h200", 135, 142), ("h100-80gb", 78, 81), ("a100-40gb", 38, 41), ("a100-80gb", 78, 81), ("l40s", 44, 46),
    ("l4", 22, 24), ("a10g", 22, 24), ("t4", 14.5, 16), ("v100-16gb", 15, 16), ("v100-32gb", 31, 32),
    ("rtx4090", 23.5, 24), ("rtx4080", 15.5, 16), ("rtx3090", 23.5, 24), ("rtx3060-12gb", 11.5, 12),
    ("rtx2080ti", 10.5, 11), ("jetson-orin-nano-8gb", 7, 8), ("cpu-16gb", 16, 16), ("cpu-32gb", 32, 32),
    ("cpu-64gb", 64, 64),
])
def test_capacities_are_plausible(dev_id, lo_gib, hi_gib):
    d = get_device(dev_id)
    assert lo_gib * GiB <= d.memory_bytes <= hi_gib * GiB


def test_half_precision_faster_than_fp32_on_tensor_core_gpus():
    for dev_id in ("h200", "h100-80gb", "a100-40gb", "l4", "rtx4090"):
        f = get_device(dev_id).peak_flops
        assert f["fp16"] > f["fp32"] and f["bf16"] > f["fp32"], dev_id


def test_unknown_device_names_the_known_ones():
    with pytest.raises(KeyError, match="rtx3080-10gb"):
        get_device("no-such-gpu")


def test_device_drives_backend_and_fit():
    import memdesigner
    from memdesigner.model.design import Design

    d = Design("tiny")
    d.add_node("Input", {"shape": (10,)}, id="in")
    d.add_node("Linear", {"out_features": 10}, id="fc")
    d.add_edge("in", "fc")
    for dev in ("cpu-16gb", "apple-m2-max-32gb", "t4"):
        rep = memdesigner.estimate(d, device=dev)
        assert rep.settings["backend"] == get_device(dev).kind
        assert rep.device["fits"] is True
        # allocator rounding only adds: the device peak is at least peak + runtime overhead
        assert rep.device_peak_bytes >= rep.peak_bytes + get_device(dev).runtime_overhead_bytes
