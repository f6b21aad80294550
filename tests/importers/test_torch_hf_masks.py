"""While the importer traces, transformers 5.x's masking_utils gives eager's answers (not
exporting, positions not packed), so the traced decoder runs SDPA causal with enable_gqa as the
eager step does instead of a materialised mask and repeat_kv copies (+4.3 % -> +0.3 % in SGD on
benchmarks/hf_versions.py's Llama under 5.25.0). 4.x is left alone: its eager step builds the
mask too. A stand-in module plays transformers here (the suite has no transformers)."""

import sys
import types

import pytest

from memdesigner.importers._torch_hf_masks import eager_hf_masks


@pytest.fixture
def fake_transformers(monkeypatch):
    def install(version):
        tf = types.ModuleType("transformers")
        tf.__version__ = version
        mu = types.ModuleType("transformers.masking_utils")
        mu.find_packed_sequence_indices = lambda position_ids: "packed mask"
        mu.is_torchdynamo_exporting = lambda: True
        monkeypatch.setitem(sys.modules, "transformers", tf)
        monkeypatch.setitem(sys.modules, "transformers.masking_utils", mu)
        return mu
    return install


def test_transformers_5_masks_are_eager_while_tracing(fake_transformers):
    mu = fake_transformers("5.25.0")
    with eager_hf_masks():
        assert mu.find_packed_sequence_indices(None) is None
        assert mu.is_torchdynamo_exporting() is False
    assert mu.find_packed_sequence_indices(None) == "packed mask" and mu.is_torchdynamo_exporting() is True


def test_transformers_4_keeps_its_own(fake_transformers):
    mu = fake_transformers("4.57.6")
    with eager_hf_masks():
        assert mu.find_packed_sequence_indices(None) == "packed mask" and mu.is_torchdynamo_exporting() is True


def test_without_transformers_nothing_happens(monkeypatch):
    monkeypatch.delitem(sys.modules, "transformers", raising=False)
    with eager_hf_masks():
        pass
