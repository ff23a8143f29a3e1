#!/usr/bin/env bash
# Provision one lab VM: the Vagrantfile runs `bash scripts/vagrant-provision.sh MACHINE` as root in
# the checkout it shares with the host (/home/vagrant/ocslab). Idempotent.
#   ocslab      Ubuntu 24.04, OS-Ken; set-up extras: torch (ocslab torch / ocslab train)
#   ocslab-ryu  Ubuntu 20.04; set-up extras: ryu (Ryu 4.34 on Python 3.9, --controller ryu)
# The machine's virtual environments are its own, outside the share: a venv the host made there
# has the host's interpreter in its links and scripts and does not run in the VM, and the two
# machines (Python 3.12; 3.11 and 3.9) cannot share one. So scripts/setup.sh runs with
#   OCSLAB_VENV=$OCSLAB_VENVS/MACHINE/venv  and  OCSLAB_RYU_VENV=$OCSLAB_VENVS/MACHINE/venv-ryu
# and the checkout's .venv and .venv-ryu, if any, are neither used nor touched. Then:
#   /etc/profile.d/ocslab.sh   exports both variables to login shells (`vagrant ssh`);
#   /etc/sudoers.d/ocslab      keeps them under sudo (`sudo make demo`);
#   /usr/local/bin/ocslab      links to the machine's ocslab (`sudo ocslab run ...`);
# and a smoke run of the demo (with --controller ryu on ocslab-ryu) writes runs/MACHINE-smoke-*.
# Environment (defaults are the VM's; the tests change them):
#   OCSLAB_VENVS           where the environments go (default /home/vagrant/venvs); absolute,
#                          outside the checkout
#   OCSLAB_EXTRAS          the set-up extras, instead of the machine's
#   OCSLAB_PROVISION_ROOT  the directory etc/ and usr/local/bin/ above are under (default /)
#   OCSLAB_PROVISION_SMOKE 0: no smoke run
set -euo pipefail
cd "$(dirname "$0")/.."

machine=${1:-}
case "$machine" in
  ocslab) extras=torch; flags=() ;;
  ocslab-ryu) extras=ryu; flags=(--controller ryu) ;;
  *) echo "vagrant-provision: MACHINE must be ocslab or ocslab-ryu, not '$machine'" >&2; exit 2 ;;
esac
venvs=${OCSLAB_VENVS:-/home/vagrant/venvs}
case "$venvs" in
  /*) ;;
  *) echo "vagrant-provision: OCSLAB_VENVS must be an absolute path, not '$venvs'" >&2; exit 2 ;;
esac
checkout=$(pwd -P)
resolved=$(realpath -m "$venvs")
if [ "$resolved" = "$checkout" ] || [ "${resolved#"$checkout"/}" != "$resolved" ]; then
  echo "vagrant-provision: OCSLAB_VENVS ($venvs) is inside the checkout shared with the host; give a path outside $checkout" >&2
  exit 2
fi
sysroot=${OCSLAB_PROVISION_ROOT:-/}

export OCSLAB_VENV="$resolved/$machine/venv"
export OCSLAB_RYU_VENV="$resolved/$machine/venv-ryu"
export OCSLAB_EXTRAS="${OCSLAB_EXTRAS-$extras}"
echo "vagrant-provision: $machine, extras '${OCSLAB_EXTRAS}', environments under $resolved/$machine"
bash scripts/setup.sh

# Rewritten every time (same content): idempotent.
mkdir -p "$sysroot/etc/profile.d" "$sysroot/etc/sudoers.d" "$sysroot/usr/local/bin"
cat > "$sysroot/etc/profile.d/ocslab.sh" <<EOF
# ocslab lab VM ($machine), written by scripts/vagrant-provision.sh: this machine's virtual
# environments, outside the checkout shared with the host.
export OCSLAB_VENV=$OCSLAB_VENV
export OCSLAB_RYU_VENV=$OCSLAB_RYU_VENV
EOF
sudoers=$(mktemp)
echo 'Defaults env_keep += "OCSLAB_VENV OCSLAB_RYU_VENV"' > "$sudoers"
if command -v visudo >/dev/null 2>&1 && ! visudo -cqf "$sudoers"; then
  rm -f "$sudoers"
  echo "vagrant-provision: visudo refused the sudoers line keeping OCSLAB_VENV" >&2
  exit 1
fi
install -m 0440 "$sudoers" "$sysroot/etc/sudoers.d/ocslab"
rm -f "$sudoers"
ln -sfn "$OCSLAB_VENV/bin/ocslab" "$sysroot/usr/local/bin/ocslab"

if [ "${OCSLAB_PROVISION_SMOKE:-1}" != 0 ]; then
  "$OCSLAB_VENV/bin/ocslab" run experiments/demo.yaml "${flags[@]}" --out "runs/$machine-smoke-$(date +%s)"
fi
echo "vagrant-provision: $machine ready ($OCSLAB_VENV/bin/ocslab)"
