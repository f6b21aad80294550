#!/usr/bin/env bash
# Sets memdesigner up on a fresh Debian/Ubuntu machine, in a virtual environment `.venv` in the
# repository (Debian 12+/Ubuntu 23.04+ refuse pip installs into the system Python, PEP 668):
#   1. Qt's system libraries, including those of the xcb platform plugin that opens the window on
#      X11, and python3-venv where `python3 -m venv` lacks it: one apt-get call, only when missing;
#   2. .venv (reused when it already works), torch 2.13.0 pinned (skipped when not available),
#      then the package itself, editable, with its test tools.
# Afterwards: .venv/bin/memdesigner, .venv/bin/python -m pytest -q.  PYTHON=... picks the interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
VENV=.venv

libs=$(ldconfig -p 2>/dev/null || true)
need=()
have() { grep -q "$1" <<<"$libs"; }
# soname -> Debian package: the Qt core needs the first seven, the xcb plugin the rest
for pair in libEGL.so.1:libegl1 libGL.so.1:libgl1 libxkbcommon.so.0:libxkbcommon0 \
            libfontconfig.so.1:libfontconfig1 libdbus-1.so.3:libdbus-1-3 libglib-2.0.so.0:libglib2.0-0 \
            libxkbcommon-x11.so.0:libxkbcommon-x11-0 libxcb-cursor.so.0:libxcb-cursor0 \
            libxcb-icccm.so.4:libxcb-icccm4 libxcb-keysyms.so.1:libxcb-keysyms1 libxcb-image.so.0:libxcb-image0 \
            libxcb-render-util.so.0:libxcb-render-util0 libxcb-shape.so.0:libxcb-shape0 \
            libxcb-xinerama.so.0:libxcb-xinerama0 libxcb-xkb.so.1:libxcb-xkb1 libxcb-randr.so.0:libxcb-randr0; do
  have "${pair%%:*}" || need+=("${pair#*:}")
done
venv_ok() { [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import sys, pip" >/dev/null 2>&1; }
if ! venv_ok && ! "$PY" -c "import ensurepip, venv" >/dev/null 2>&1; then
  need+=(python3-venv)  # Debian ships venv's ensurepip separately
fi

if [ ${#need[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    echo "memdesigner setup: installing ${need[*]}" >&2
    $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "memdesigner setup: please install these system packages: ${need[*]}" >&2
  fi
fi

if ! venv_ok; then
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
fi
VPY="$VENV/bin/python"
# torch first, pinned: an open range would pull a multi-GB CUDA build on a machine without torch
if ! "$VPY" -c "import sys; from importlib.metadata import version; sys.exit(version('torch').split('+')[0] != '2.13.0')" \
    >/dev/null 2>&1; then
  "$VPY" -m pip install -q "torch==2.13.0" \
    || echo "memdesigner setup: torch 2.13.0 not available; PyTorch import and measurement tests will be skipped" >&2
fi
# the package and its dependencies: again only when pyproject.toml changed since the last setup
stamp="$VENV/.memdesigner-setup"
want=$(cksum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || ! "$VPY" -c "import memdesigner, sys; sys.exit(not memdesigner.__file__.startswith('$PWD/'))" >/dev/null 2>&1; then
  "$VPY" -m pip install -q -e ".[test]"
  echo "$want" > "$stamp"
fi
echo "memdesigner setup: ready: $VENV/bin/memdesigner, $VENV/bin/python -m pytest -q" >&2
