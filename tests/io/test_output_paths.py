"""Every command that writes a file refuses an unwritable -o with one stderr line naming the path
and the reason, exit 2, before it does the work (loading, importing, rendering)."""

import os
import tempfile

import pytest
from helpers import EXAMPLES, ROOT

from memdesigner.cli import main
from memdesigner.io.output_path import OutputPathError, check_output_path

DESIGN = str(EXAMPLES / "resnet18.json")
KERAS = str(ROOT / "resources" / "fixtures" / "functional_small.keras2.json")


def commands(out):
    return {
        "import_keras": ["import", "keras", KERAS, "-o", out],
        # the model file does not exist: a path error before it shows the check runs first
        "import_torch": ["import", "torch", "/no/such/model.py:make", "-o", out],
        "export_torch": ["export", "torch", DESIGN, "-o", out],
        "render": ["render", DESIGN, "-o", out],
        "export_snapshot": ["export", "snapshot", DESIGN, "-o", out],
    }


def test_report_refuses_an_unwritable_output_in_one_line(capsys):
    assert main(["report", DESIGN, "--no-graph", "-o", "/no/such/dir/r.html"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "folder /no/such/dir does not exist" in err


def _read_only_dir(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o555)
    for folder in (ro, "/sys", "/proc"):  # root writes into a 0555 folder: try read-only mounts too
        try:
            fd, probe = tempfile.mkstemp(dir=str(folder))
        except OSError:
            return folder
        os.close(fd)
        os.unlink(probe)
    pytest.skip("no read-only folder to try")


BAD = {
    "missing_folder": (lambda tmp: "/no/such/dir/x.json", "folder /no/such/dir does not exist"),
    "directory": (lambda tmp: str(tmp), "is a directory"),
    "under_a_file": (lambda tmp: str(tmp / "file.txt" / "x.json"), "is not a folder"),
    "read_only": (lambda tmp: str(_read_only_dir(tmp)) + "/x.json", "cannot write in"),
}


@pytest.mark.parametrize("bad", sorted(BAD))
@pytest.mark.parametrize("cmd", sorted(commands("x")))
def test_unwritable_output_is_one_line_exit_2(cmd, bad, tmp_path, capsys):
    (tmp_path / "file.txt").write_text("x")
    make, reason = BAD[bad]
    out = make(tmp_path)
    code = main(commands(out)[cmd])
    stdout, err = capsys.readouterr()
    assert code == 2, (stdout, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"memdesigner: error: {out}: cannot write")
    assert reason in lines[0]
    assert "Traceback" not in err and stdout == ""


def test_writable_paths_pass_and_symlinks_are_judged_by_their_target(tmp_path):
    assert check_output_path(tmp_path / "new.json") == tmp_path / "new.json"
    (tmp_path / "old.json").write_text("{}")
    assert check_output_path(tmp_path / "old.json") == tmp_path / "old.json"
    (tmp_path / "link").symlink_to(tmp_path / "missing" / "x.json")
    with pytest.raises(OutputPathError, match="does not exist"):
        check_output_path(tmp_path / "link")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "old.json"]  # the probe is gone


def test_export_still_writes(tmp_path, capsys):
    out = tmp_path / "model.py"
    assert main(["export", "torch", DESIGN, "-o", str(out)]) == 0
    assert "class" in out.read_text()
