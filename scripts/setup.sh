#!/usr/bin/env bash
# Install everything ocslab needs and start Open vSwitch. Idempotent; run as root.
#   Debian packages, each for what uses it: mininet (hosts, links), openvswitch-switch (the OCS
#     bridges), iproute2 (ip, tc and ss: Mininet's links, the emulator's qdiscs and probes;
#     Debian's mininet does not depend on it and a minimal Debian lacks it), ethtool (veth
#     offloads off on the userspace datapath), iputils-ping (the emulation tests' reachability
#     probes), tcpdump (ocslab run --pcap), python3-venv and make, openssh-server and sudo (a fabric
#     spread over servers: the lab's servers each run this sshd, never the machine's own service;
#     Mininet's cluster edition runs every server command through sudo); with the test extra, vagrant
#     (the tests validate the Vagrantfile) and tshark (Wireshark's dissector, the capture
#     analysis's second reader of retransmissions; ocslab pcap uses it wherever it is installed).
#   .venv (or $OCSLAB_VENV): made from the system python3 with system site packages (so `import
#          mininet` works), with ocslab installed editable and its Python dependencies.
#   .venv-ryu (or $OCSLAB_RYU_VENV; when OCSLAB_EXTRAS has ryu, and a Python 3.9 is found, or on
#          Ubuntu installed): Ryu 4.34 with eventlet 0.30.2, for `ocslab run --controller ryu`
#          (scripts/setup_ryu.sh); Ryu does not import on Python 3.10+. Where it cannot be made,
#          its UNAVAILABLE file says why.
# Environment: OCSLAB_EXTRAS, a comma-separated list: test (pytest, and Sphinx to build the docs; docs
#   installs the same), torch (PyTorch 2.13 CPU, for
#   ocslab torch / ocslab train), ryu (the Ryu environment above). test also installs Dask's
#   distributed (sweeps on a cluster, emulation.parallel; tested on a local cluster).
# OCSLAB_VENV: where the virtual environment goes (default .venv; a relative path is relative to the
#   repository). OCSLAB_RYU_VENV: where the Ryu one goes (default: OCSLAB_VENV's path with -ryu
#   appended, so .venv-ryu; `ocslab` looks there by itself). The lab VMs put both outside the
#   checkout they share with their host (scripts/vagrant-provision.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${OCSLAB_VENV:-.venv}
export OCSLAB_RYU_VENV=${OCSLAB_RYU_VENV:-$VENV-ryu}  # read by scripts/setup_ryu.sh

if [ "$(id -u)" -ne 0 ]; then
  echo "setup: run as root (it installs Debian packages and starts Open vSwitch)" >&2
  exit 2
fi

pkgs=(mininet openvswitch-switch iproute2 ethtool iputils-ping tcpdump python3-venv make openssh-server sudo)
# the tests also validate the lab VMs' Vagrantfile (`vagrant validate`, no provider needed)
case ",${OCSLAB_EXTRAS:-}," in *,test,*) pkgs+=(vagrant tshark) ;; esac
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Open vSwitch: start it if it is not answering (never restart a running one: other users' bridges).
if ! timeout 5 ovs-vsctl --timeout=3 show >/dev/null 2>&1; then
  echo "setup: starting Open vSwitch"
  /usr/share/openvswitch/scripts/ovs-ctl start --system-id=random >/dev/null 2>&1 || true
  timeout 20 bash -c 'until ovs-vsctl --timeout=2 show >/dev/null 2>&1; do sleep 0.2; done'
fi

# Virtual environment from the system interpreter (Debian's mininet is built for it), which must be
# Python 3.10+ (Debian 12: 3.11; Ubuntu 24.04: 3.12). Ubuntu 20.04's is 3.8: there a python3.10+
# on PATH is used, or python3.11 from the deadsnakes PPA is installed (the Ryu lab VM).
PY=/usr/bin/python3
py_ok() { "$1" -c "import sys; sys.exit(sys.version_info < (3, 10))" 2>/dev/null; }
if ! py_ok "$PY"; then
  PY=""
  for v in 3.12 3.11 3.10; do
    if command -v "python$v" >/dev/null 2>&1 && py_ok "$(command -v "python$v")"; then PY=$(command -v "python$v"); break; fi
  done
  if [ -z "$PY" ] && grep -q '^ID=ubuntu' /etc/os-release 2>/dev/null; then
    echo "setup: $(/usr/bin/python3 --version) is older than 3.10; installing python3.11 (deadsnakes PPA)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends software-properties-common >/dev/null
    add-apt-repository -y ppa:deadsnakes/ppa >/dev/null
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends python3.11 python3.11-venv >/dev/null
    PY=/usr/bin/python3.11
  fi
  if [ -z "$PY" ]; then
    echo "setup: ocslab needs Python 3.10 or newer; $(/usr/bin/python3 --version) found and no python3.10+ on PATH" >&2
    exit 2
  fi
fi
# A virtual environment made on another machine (a VM's host sharing the checkout) has the other
# machine's interpreter in its links and scripts: it is refused, never repaired in place (the other
# machine still uses it).
if [ -e "$VENV/bin/python" ] || [ -L "$VENV/bin/python" ]; then
  if ! "$VENV/bin/python" -c "" 2>/dev/null; then
    echo "setup: $VENV/bin/python does not run on this machine (a virtual environment made on another one?): remove $VENV, or set OCSLAB_VENV to a path of this machine" >&2
    exit 2
  fi
else
  "$PY" -m venv --system-site-packages "$VENV"
fi
extras=",${OCSLAB_EXTRAS:-},"
# pip, quiet and without its warnings; when pip fails (no network, a proxy's certificate, no wheel
# for this Python) the set-up stops there, saying so under pip's own errors.
pip_install() {
  if ! "$VENV/bin/pip" install -q --disable-pip-version-check "$@" 2>&1 | { grep -v -i "^warning" || true; }; then
    echo "setup: pip install $* failed (pip's errors are above)" >&2
    exit 1
  fi
}
stamp=$VENV/.ocslab-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  pip_install -e .
  "$VENV/bin/python" -c "import os_ken, mininet.net, numpy, scipy, networkx, pydantic, cvxpy, topohub, scapy, simpy"
  touch "$stamp"
fi
test_imports="import pytest, xdist, distributed, jsonschema, sphinx, myst_parser, furo, sphinxarg, sphinxcontrib.autodoc_pydantic"
if [[ $extras == *,test,* || $extras == *,docs,* ]] && ! "$VENV/bin/python" -c "$test_imports" 2>/dev/null; then
  pip_install -e ".[test]"
  "$VENV/bin/python" -c "$test_imports"
fi
if [[ $extras == *,torch,* ]] && ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  pip_install torch==2.13.0
  "$VENV/bin/python" -c "import torch"
fi
if [[ $extras == *,ryu,* ]] && [ ! -f "$OCSLAB_RYU_VENV/.ocslab-installed" ]; then
  bash scripts/setup_ryu.sh || true
fi
echo "setup: ready ($VENV/bin/ocslab)"
