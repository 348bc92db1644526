#!/usr/bin/env bash
# Create .venv with a Python >= 3.12 and install jaxbench into it (idempotent).
# Usage: scripts/setup.sh [EXTRAS]   e.g. scripts/setup.sh test
# Set JAXBENCH_PYTHON to force an interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"

is_ok() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; }

find_python() {
  local c
  for c in "${JAXBENCH_PYTHON:-}" python3.13 python3.12 python3 python; do
    [ -n "$c" ] && command -v "$c" >/dev/null 2>&1 && is_ok "$c" && { command -v "$c"; return; }
  done
  # pyenv shims fail unless PYENV_VERSION names the version: look at its installs directly.
  local root
  root="$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")"
  for c in $(ls -d "$root"/versions/3.1[2-9]*/bin/python3 2>/dev/null | sort -rV); do
    is_ok "$c" && { echo "$c"; return; }
  done
  return 1
}

if [ ! -x .venv/bin/python ] || ! is_ok .venv/bin/python; then
  py="$(find_python)" || { echo "setup: no Python >= 3.12 found (JAX 0.11+ needs it); set JAXBENCH_PYTHON" >&2; exit 1; }
  echo "setup: creating .venv with $py ($("$py" --version))"
  rm -rf .venv
  "$py" -m venv .venv
fi
spec="."
[ -n "$extras" ] && spec=".[$extras]"
.venv/bin/python -m pip install -q --disable-pip-version-check -e "$spec"
