#!/usr/bin/env bash
# Make .venv-ryu: Ryu 4.34 (the last release) with eventlet 0.30.2 on Python 3.9, for
# `ocslab run --controller ryu`: Ryu does not import on Python 3.10+, and ocslab's modules need
# 3.9 (Ubuntu 20.04's system Python 3.8 is too old; its archive's python3.9 is installed there).
# Idempotent. Where it cannot be made, .venv-ryu/UNAVAILABLE holds one line saying why, and the
# exit status is 1. It goes to $OCSLAB_RYU_VENV when set (else $OCSLAB_VENV-ryu, else .venv-ryu; a
# relative path is relative to the repository), as scripts/setup.sh says.
set -uo pipefail
cd "$(dirname "$0")/.."
RV=${OCSLAB_RYU_VENV:-${OCSLAB_VENV:-.venv}-ryu}

unavailable() {
  mkdir -p "$RV"
  echo "$1" > "$RV/UNAVAILABLE"
  echo "setup: --controller ryu unavailable: $1" >&2
  exit 1
}

# A Python 3.9 that runs (a pyenv shim on PATH may not, if that version is not selected).
find_py() {
  local c
  local candidates=(/usr/bin/python3.9 /usr/local/bin/python3.9)
  if command -v pyenv >/dev/null 2>&1; then
    for c in "$(pyenv root)"/versions/3.9.*/bin/python3.9; do candidates+=("$c"); done
  fi
  for c in "${candidates[@]}"; do
    if [ -x "$c" ] && "$c" -c "import sys, venv, ensurepip; assert sys.version_info[:2] == (3, 9)" 2>/dev/null; then
      echo "$c"; return
    fi
  done
}
py=$(find_py)
if [ -z "$py" ] && grep -q '^ID=ubuntu' /etc/os-release 2>/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3.9 python3.9-venv >/dev/null 2>&1 || true
  py=$(find_py)
fi
[ -n "$py" ] || unavailable "no Python 3.9 found (in /usr/bin, /usr/local/bin or pyenv's versions); Ryu 4.34 needs Python <= 3.9 and ocslab 3.9"

rm -f "$RV/UNAVAILABLE"
if [ ! -x "$RV/bin/python" ]; then
  "$py" -m venv "$RV" || unavailable "$py -m venv failed"
fi
echo "setup: installing Ryu 4.34 into $RV ($("$py" --version 2>&1))"
pip=("$RV/bin/pip" install -q --disable-pip-version-check)
# Ryu's setup.py uses setuptools' easy_install.get_script_args, removed in setuptools 58.
"${pip[@]}" "setuptools<58" wheel >/dev/null 2>&1 || unavailable "pip could not install setuptools<58 into $RV"
"${pip[@]}" --no-build-isolation "ryu==4.34" "eventlet==0.30.2" numpy scipy networkx pyyaml pydantic eval_type_backport cvxpy clarabel 2>&1 | grep -v -i "^warning" || true
"$RV/bin/python" -c "import ryu, eventlet, numpy, scipy, networkx, yaml, pydantic, cvxpy; from ryu.cmd import manager" 2>/dev/null \
  || unavailable "Ryu 4.34 did not import in $RV after pip install (see pip's output above)"
touch "$RV/.ocslab-installed"
echo "setup: $RV ready (ryu-manager $("$RV/bin/ryu-manager" --version 2>&1 | tail -1))"
