"""Saving over a design keeps its permission bits and writes through a symlink, still atomically."""

import os
import stat

import pytest

from memdesigner.io.design_file import load_design, save_design
from memdesigner.model.design import Design

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX modes and symlinks")


def design(name="t") -> Design:
    d = Design(name)
    d.add_node("Input", {"shape": (8,)}, id="in")
    return d


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.mark.parametrize("bits", [0o644, 0o664, 0o640])
def test_save_over_keeps_the_mode(tmp_path, bits):
    path = tmp_path / "d.json"
    save_design(design("old"), path)
    os.chmod(path, bits)
    save_design(design("new"), path)
    assert mode(path) == bits
    assert load_design(path).name == "new"


def test_new_file_gets_the_umask_default(tmp_path, umask_022):
    path = tmp_path / "new.json"
    save_design(design(), path)
    assert mode(path) == 0o644
    os.umask(0o077)
    save_design(design(), tmp_path / "private.json")
    assert mode(tmp_path / "private.json") == 0o600


def test_symlink_is_written_through_and_kept(tmp_path):
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    target = real_dir / "d.json"
    save_design(design("old"), target)
    os.chmod(target, 0o644)
    link = tmp_path / "link.json"
    link.symlink_to(os.path.relpath(target, tmp_path))
    save_design(design("new"), link)
    assert link.is_symlink()
    assert load_design(target).name == "new"
    assert mode(target) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "real"]  # no temp file left
    assert sorted(p.name for p in real_dir.iterdir()) == ["d.json"]
