"""Checks made before the window's QApplication exists.

Without a display, or with the X11 (xcb) platform plugin missing system libraries, Qt prints a
screenful about xcb-cursor and "Reinstalling the application may fix this problem", then aborts
the process (exit 134). Here the same situations give one line that says what is wrong and what
to do instead.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

# platforms that need no display server
HEADLESS_PLATFORMS = {"offscreen", "minimal", "minimalegl", "vnc", "eglfs", "linuxfb", "vkkhrdisplay"}

# sonames the xcb plugin loads -> the Debian/Ubuntu package that ships them
XCB_PACKAGES = {
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-xinerama.so.0": "libxcb-xinerama0",
    "libxcb-xkb.so.1": "libxcb-xkb1",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libxkbcommon.so.0": "libxkbcommon0",
    "libxcb.so.1": "libxcb1",
    "libX11-xcb.so.1": "libx11-xcb1",
    "libEGL.so.1": "libegl1",
    "libGL.so.1": "libgl1",
    "libfontconfig.so.1": "libfontconfig1",
    "libdbus-1.so.3": "libdbus-1-3",
    "libglib-2.0.so.0": "libglib2.0-0",
}

HEADLESS_HINT = "use `memdesigner render DESIGN.json -o OUT.png` or `memdesigner estimate DESIGN.json` instead"


def _platforms(env) -> list[str]:
    """The platform plugins Qt will try, in order ('' when Qt picks by itself)."""
    spec = env.get("QT_QPA_PLATFORM", "").strip()
    if not spec:
        return [""]
    return [p.split(":", 1)[0].strip().lower() for p in spec.split(";") if p.strip()]


def display_problem(env=None, platform: str | None = None) -> str | None:
    """Why no window can be shown here (one line), or None."""
    env = os.environ if env is None else env
    platform = sys.platform if platform is None else platform
    if not platform.startswith("linux"):
        return None
    has_x = bool(env.get("DISPLAY"))
    has_wayland = bool(env.get("WAYLAND_DISPLAY"))
    for p in _platforms(env):
        if p in HEADLESS_PLATFORMS or (p == "xcb" and has_x) or (p.startswith("wayland") and has_wayland):
            return None
        if p not in ("", "xcb") and not p.startswith("wayland"):
            return None  # a plugin this check does not know: let Qt decide
        if p == "" and (has_x or has_wayland):
            return None
    return f"no display found (neither DISPLAY nor WAYLAND_DISPLAY is set): {HEADLESS_HINT}"


def missing_packages(ldd_output: str) -> list[str]:
    """Packages to install for the libraries ``ldd`` reports as 'not found'."""
    out = []
    for soname in re.findall(r"^\s*(\S+)\s*=>\s*not found", ldd_output, flags=re.M):
        pkg = XCB_PACKAGES.get(soname, soname)
        if pkg not in out:
            out.append(pkg)
    return out


def _xcb_plugin() -> Path | None:
    try:
        import PySide6
    except ImportError:
        return None
    p = Path(PySide6.__file__).parent / "Qt" / "plugins" / "platforms" / "libqxcb.so"
    return p if p.exists() else None


def xcb_problem(env=None, platform: str | None = None) -> str | None:
    """When Qt will use the xcb plugin and system libraries it needs are missing: one line naming
    the packages. None when that is fine or cannot be told (no ldd)."""
    env = os.environ if env is None else env
    platform = sys.platform if platform is None else platform
    if not platform.startswith("linux"):
        return None
    if not _uses_xcb(env):
        return None
    plugin = _xcb_plugin()
    if plugin is None:
        return None
    try:
        ldd = subprocess.run(["ldd", str(plugin)], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    pkgs = missing_packages(ldd)
    if not pkgs:
        return None
    return (f"Qt's X11 platform plugin cannot load: system libraries are missing; install them with "
            f"`sudo apt-get install {' '.join(pkgs)}` (or run `bash scripts/setup.sh`)")


def _uses_xcb(env) -> bool:
    first = _platforms(env)[0]
    return first == "xcb" or (first == "" and bool(env.get("DISPLAY")) and not env.get("WAYLAND_DISPLAY"))


def x_server_problem(env=None, platform: str | None = None, connect=None) -> str | None:
    """When Qt will use X11 and no X server answers at DISPLAY (a stale ``:99`` after Xvfb quit,
    an ssh session without forwarding): one line. Asked the way Qt's plugin asks, through
    libxcb's xcb_connect (auth included); None when that is fine or cannot be told (no libxcb)."""
    env = os.environ if env is None else env
    platform = sys.platform if platform is None else platform
    if not platform.startswith("linux") or not _uses_xcb(env) or not env.get("DISPLAY"):
        return None
    display = env["DISPLAY"]
    ok = (connect or _xcb_connects)(display)
    if ok is None or ok:
        return None
    return f"no X server answers at DISPLAY={display} (is Xvfb or the desktop running?): {HEADLESS_HINT}"


def _xcb_connects(display: str) -> bool | None:
    import ctypes

    try:
        xcb = ctypes.CDLL("libxcb.so.1")
    except OSError:
        return None
    xcb.xcb_connect.restype = ctypes.c_void_p
    xcb.xcb_connect.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    xcb.xcb_connection_has_error.argtypes = [ctypes.c_void_p]
    xcb.xcb_disconnect.argtypes = [ctypes.c_void_p]
    conn = xcb.xcb_connect(display.encode(), None)
    try:
        return xcb.xcb_connection_has_error(conn) == 0
    finally:
        xcb.xcb_disconnect(conn)  # (an errored connection is freed the same way)


def window_problem() -> str | None:
    return display_problem() or xcb_problem() or x_server_problem()
