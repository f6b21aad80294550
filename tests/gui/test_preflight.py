"""`memdesigner` without a display, or with Qt's xcb plugin missing libraries: one line, exit 2,
instead of Qt's abort (exit 134) with its xcb-cursor text."""

import os
import subprocess
import sys

from memdesigner._qt.preflight import display_problem, missing_packages, xcb_problem


def test_no_display_subprocess_one_line_exit_2():
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    res = subprocess.run([sys.executable, "-m", "memdesigner.cli"], env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1, res.stderr
    assert res.stderr.startswith("memdesigner: error: no display found")
    assert "memdesigner render" in res.stderr and "memdesigner estimate" in res.stderr
    assert "xcb" not in res.stderr


def test_which_environments_have_a_display():
    linux = "linux"
    assert display_problem({}, linux)
    assert display_problem({"QT_QPA_PLATFORM": "xcb"}, linux)
    assert display_problem({"QT_QPA_PLATFORM": "wayland", "DISPLAY": ":0"}, linux)
    assert display_problem({"DISPLAY": ":0"}, linux) is None
    assert display_problem({"WAYLAND_DISPLAY": "wayland-0"}, linux) is None
    assert display_problem({"QT_QPA_PLATFORM": "offscreen"}, linux) is None
    assert display_problem({"QT_QPA_PLATFORM": "minimal"}, linux) is None
    assert display_problem({"QT_QPA_PLATFORM": "vnc:size=800x600"}, linux) is None
    assert display_problem({"QT_QPA_PLATFORM": "wayland;xcb", "DISPLAY": ":1"}, linux) is None
    assert display_problem({}, "darwin") is None
    assert display_problem({}, "win32") is None


LDD = """\
\tlinux-vdso.so.1 (0x00007ffd)
\tlibxcb-cursor.so.0 => not found
\tlibxcb-icccm.so.4 => not found
\tlibQt6XcbQpa.so.6 => /opt/PySide6/Qt/lib/libQt6XcbQpa.so.6 (0x00007f)
\tlibxkbcommon-x11.so.0 => not found
\tlibweird.so.3 => not found
"""


def test_missing_libraries_named_as_packages():
    assert missing_packages(LDD) == ["libxcb-cursor0", "libxcb-icccm4", "libxkbcommon-x11-0", "libweird.so.3"]
    assert missing_packages("\tlibxcb.so.1 => /usr/lib/libxcb.so.1 (0x1)\n") == []


def test_xcb_problem_names_packages(monkeypatch, tmp_path):
    import memdesigner._qt.preflight as pf

    class Done:
        stdout = LDD

    plugin = tmp_path / "libqxcb.so"
    plugin.write_bytes(b"")
    monkeypatch.setattr(pf, "_xcb_plugin", lambda: plugin)
    monkeypatch.setattr(pf.subprocess, "run", lambda *a, **k: Done())
    msg = xcb_problem({"DISPLAY": ":0"}, "linux")
    assert msg.startswith("Qt's X11 platform plugin cannot load")
    assert "sudo apt-get install libxcb-cursor0 libxcb-icccm4 libxkbcommon-x11-0" in msg
    assert "\n" not in msg
    assert xcb_problem({"DISPLAY": ":0", "QT_QPA_PLATFORM": "offscreen"}, "linux") is None
    assert xcb_problem({"WAYLAND_DISPLAY": "w"}, "linux") is None


def test_display_with_no_server_one_line_exit_2(tmp_path):
    """DISPLAY naming a display no X server serves (Xvfb gone): Qt's xcb plugin aborted (134)."""
    env = {k: v for k, v in os.environ.items() if k not in ("WAYLAND_DISPLAY", "QT_QPA_PLATFORM", "XAUTHORITY")}
    env["DISPLAY"] = ":4711"  # no /tmp/.X11-unix/X4711 here
    env["XAUTHORITY"] = str(tmp_path / "none")
    assert not os.path.exists("/tmp/.X11-unix/X4711")
    res = subprocess.run([sys.executable, "-m", "memdesigner.cli"], env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 2, (res.returncode, res.stderr[-300:])
    assert res.stderr == ("memdesigner: error: no X server answers at DISPLAY=:4711 (is Xvfb or the desktop "
                          "running?): use `memdesigner render DESIGN.json -o OUT.png` or `memdesigner estimate "
                          "DESIGN.json` instead\n")


def test_x_server_check_only_where_qt_uses_x11():
    from memdesigner._qt.preflight import x_server_problem

    down = lambda display: False  # noqa: E731
    assert x_server_problem({"DISPLAY": ":1"}, "linux", down).startswith("no X server answers at DISPLAY=:1")
    assert x_server_problem({"DISPLAY": ":1"}, "linux", lambda d: True) is None
    assert x_server_problem({"DISPLAY": ":1", "WAYLAND_DISPLAY": "wayland-0"}, "linux", down) is None
    assert x_server_problem({"DISPLAY": ":1", "QT_QPA_PLATFORM": "offscreen"}, "linux", down) is None
    assert x_server_problem({"DISPLAY": ":1", "QT_QPA_PLATFORM": "xcb"}, "linux", down) is not None
    assert x_server_problem({"DISPLAY": ":1"}, "darwin", down) is None
    assert x_server_problem({"DISPLAY": ":1"}, "linux", lambda d: None) is None  # no libxcb: Qt decides
