#!/usr/bin/env bash
# Make .venv-ryu: Ryu 4.34 (the last release) with eventlet 0.30.2 on a Python 3.8 or 3.9, for
# `ocslab run --controller ryu` (Ryu does not import on Python 3.10+). Idempotent. Where it
# cannot be made, .venv-ryu/UNAVAILABLE holds one line saying why, and the exit status is 1.
set -uo pipefail
cd "$(dirname "$0")/.."

unavailable() {
  mkdir -p .venv-ryu
  echo "$1" > .venv-ryu/UNAVAILABLE
  echo "setup: --controller ryu unavailable: $1" >&2
  exit 1
}

# A Python 3.9 or 3.8 that runs (a pyenv shim on PATH may not, if that version is not selected).
py=""
candidates=()
for v in 3.9 3.8; do
  if command -v pyenv >/dev/null 2>&1; then
    for d in "$(pyenv root)"/versions/"$v".*/bin/"python$v"; do candidates+=("$d"); done
  fi
  for d in /usr/bin/"python$v" /usr/local/bin/"python$v"; do candidates+=("$d"); done
done
for c in "${candidates[@]}"; do
  if [ -x "$c" ] && "$c" -c "import sys, venv; assert sys.version_info[:2] in ((3, 8), (3, 9))" 2>/dev/null; then
    py=$c; break
  fi
done
[ -n "$py" ] || unavailable "no Python 3.8 or 3.9 found (in /usr/bin, /usr/local/bin or pyenv's versions); Ryu 4.34 needs one"

rm -f .venv-ryu/UNAVAILABLE
if [ ! -x .venv-ryu/bin/python ]; then
  "$py" -m venv .venv-ryu || unavailable "$py -m venv failed"
fi
echo "setup: installing Ryu 4.34 into .venv-ryu ($("$py" --version 2>&1))"
pip=(.venv-ryu/bin/pip install -q --disable-pip-version-check)
# Ryu's setup.py uses setuptools' easy_install.get_script_args, removed in setuptools 58.
"${pip[@]}" "setuptools<58" wheel >/dev/null 2>&1 || unavailable "pip could not install setuptools<58 into .venv-ryu"
"${pip[@]}" --no-build-isolation "ryu==4.34" "eventlet==0.30.2" numpy scipy networkx pyyaml pydantic eval_type_backport 2>&1 | grep -v -i "^warning" || true
.venv-ryu/bin/python -c "import ryu, eventlet, numpy, scipy, networkx, yaml, pydantic; from ryu.cmd import manager" 2>/dev/null \
  || unavailable "Ryu 4.34 did not import in .venv-ryu after pip install (see pip's output above)"
touch .venv-ryu/.ocslab-installed
echo "setup: .venv-ryu ready (ryu-manager $(.venv-ryu/bin/ryu-manager --version 2>&1 | tail -1))"
