"""scripts/setup.sh on a fresh Debian/Ubuntu machine: Qt's xcb plugin libraries, a virtual
environment (Debian 12+ / Ubuntu 23.04+ refuse pip into the system Python, PEP 668), and the
README's two commands using it."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETUP = (ROOT / "scripts" / "setup.sh").read_text()

# what Qt 6's xcb platform plugin needs beyond the Qt core ("Could not load the Qt platform plugin xcb")
XCB_PACKAGES = ("libxcb-cursor0", "libxcb-icccm4", "libxcb-keysyms1", "libxcb-image0", "libxcb-render-util0",
                "libxcb-shape0", "libxcb-xinerama0", "libxcb-xkb1", "libxcb-randr0", "libxkbcommon-x11-0")


def test_setup_installs_the_xcb_plugin_libraries():
    pairs = dict(p.split(":")[::-1] for p in re.findall(r"(lib[\w.+-]+\.so\.\d+:[\w.+-]+)", SETUP))
    for pkg in XCB_PACKAGES:
        assert pkg in pairs, pkg
    assert "apt-get install" in SETUP


def test_setup_installs_into_a_venv_not_the_system_python():
    assert '"$PY" -m venv "$VENV"' in SETUP and "VENV=.venv" in SETUP
    installs = [ln.strip() for ln in SETUP.splitlines() if "pip install" in ln and not ln.strip().startswith("#")]
    assert installs and all(ln.startswith('"$VPY" -m pip install') for ln in installs), installs
    assert subprocess.run(["bash", "-n", str(ROOT / "scripts" / "setup.sh")]).returncode == 0


def test_readme_commands_use_the_venv():
    readme = (ROOT / "README.md").read_text()
    assert "bash scripts/setup.sh && .venv/bin/memdesigner" in readme
    assert "bash scripts/setup.sh && .venv/bin/python -m pytest -q" in readme
