"""The nesting check of a design file walks depths, not paths: the path to a too-deep value is
built only for a file that has one (a path list per value was a quarter of a second of a
10,000-layer File -> Open)."""

import pytest

from memdesigner.io import bounded_read, design_file
from memdesigner.io.design_file import DesignFileError, design_from_dict, design_to_dict
from memdesigner.model.design import Design


def _design(n: int) -> dict:
    d = Design("deep")
    prev = d.add_node("Input", {"shape": (4, 8)}).id
    for _ in range(n):
        nid = d.add_node("Linear", {"out_features": 8}).id
        d.add_edge(prev, nid)
        prev = nid
    return design_to_dict(d)


def test_a_good_file_never_builds_paths(monkeypatch):
    def no_paths(_data):
        raise AssertionError("the path walk ran for a file that is not too deep")

    monkeypatch.setattr(bounded_read, "_deep_path", no_paths)
    assert len(design_from_dict(_design(50)).nodes) == 51


@pytest.mark.parametrize("levels, bad", [(63, False), (64, False), (65, True), (300, True)])
def test_the_depth_limit_and_the_path_it_names(levels, bad):
    data = _design(2)
    deep: object = 8
    for _ in range(levels - 2):  # settings -> "x" -> lists: the path to the 8 is `levels` long
        deep = [deep]
    data["settings"] = {"x": deep}
    found = design_file._too_deep(data)
    assert (found is not None) == bad
    if bad:
        assert found[:2] == ["settings", "x"] and len(found) == design_file.MAX_DEPTH + 1
        with pytest.raises(DesignFileError, match=r"settings\.x.*nested deeper than 64 levels"):
            design_from_dict(data)
