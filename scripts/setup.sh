#!/usr/bin/env bash
# Installs what memdesigner needs on a fresh Debian/Ubuntu machine: Qt's system libraries
# (only when missing, via apt-get), then the package with its test and torch extras.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
ldconfig -p 2>/dev/null | grep -q 'libEGL.so.1' || need+=(libegl1)
ldconfig -p 2>/dev/null | grep -q 'libGL.so.1' || need+=(libgl1)
ldconfig -p 2>/dev/null | grep -q 'libxkbcommon.so.0' || need+=(libxkbcommon0)
ldconfig -p 2>/dev/null | grep -q 'libfontconfig.so.1' || need+=(libfontconfig1)
ldconfig -p 2>/dev/null | grep -q 'libdbus-1.so.3' || need+=(libdbus-1-3)
ldconfig -p 2>/dev/null | grep -q 'libxkbcommon-x11.so.0' || need+=(libxkbcommon-x11-0)
ldconfig -p 2>/dev/null | grep -q 'libglib-2.0.so.0' || need+=(libglib2.0-0)
if [ ${#need[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "memdesigner setup: please install Qt's system libraries: ${need[*]}" >&2
  fi
fi

PY=${PYTHON:-python3}
# torch first, pinned: an open range would pull a multi-GB CUDA build on a machine without torch
$PY -m pip install -q "torch==2.13.0" || echo "memdesigner setup: torch 2.13.0 not available; PyTorch import and measurement tests will be skipped" >&2
$PY -m pip install -q -e ".[test]"
