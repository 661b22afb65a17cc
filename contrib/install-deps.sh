#!/usr/bin/env bash
# Install, as root on Debian 12, every system package gputopo's build, harness and tests need.
#
#   sudo contrib/install-deps.sh
#
# Idempotent: packages already installed are skipped, and when nothing is missing apt is not
# touched at all (no `apt-get update`). It never starts a service: munged, slurmctld, slurmd
# and mariadb are started by contrib/cluster.sh (and the tests) when they need them. On a
# machine with systemd, Debian's postinst may start them anyway; policy-rc.d prevents that
# while we install.
set -euo pipefail

pkgs=(
  # Slurm 22.05.8 (Debian 12's packages) and munge: the daemons and clients the harness runs.
  munge slurmctld slurmd slurm-client slurm-wlm-basic-plugins slurm-wlm-basic-plugins-dev
  libslurm-dev slurmdbd mariadb-server
  # Slurm built from source with serializer/json (contrib/slurm-install.sh).
  libjson-c-dev
  # Building the plugin (bindgen needs libclang) and Slurm 24.11.5 (contrib/slurm-install.sh).
  clang libclang-dev libmunge-dev libmariadb-dev build-essential dpkg-dev curl
  # libFuzzer prebuilt for contrib/fuzz.sh (clang-14's; spares compiling it in every CI run).
  libfuzzer-14-dev
  # Tools the scripts use.
  procps psmisc util-linux iproute2
  # Slurm's own testsuite (contrib/slurm-testsuite.sh): its expect tests, and python3-venv for
  # the pytest environment of its python tests.
  expect python3-venv
  # The packages (contrib/package.sh, contrib/test-package.sh): rpmbuild, rpm, rpm2archive;
  # chrpath drops the build host's RUNPATH from the packaged plugin; lintian checks the .deb.
  rpm chrpath lintian
  # The e2e test of `gputopo metrics` and its dashboard scrapes it with a real Prometheus
  # (and checks the exposition with promtool, which the package ships).
  prometheus
)
# pip downloads NVIDIA's NVML header for Slurm's gpu/nvml build (contrib/nvml-dev.sh); any pip
# on PATH will do (the machine's own Python may bring one).
command -v pip3 >/dev/null 2>&1 || command -v pip >/dev/null 2>&1 || pkgs+=(python3-pip)

if [ "$(id -u)" != 0 ]; then
  echo "install-deps.sh: run as root (it installs Debian packages)" >&2
  exit 1
fi

missing=()
for p in "${pkgs[@]}"; do
  if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps.sh: all ${#pkgs[@]} packages already installed"
  exit 0
fi

echo "install-deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Do not let package scripts start daemons (exit 101 = "action forbidden").
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy"
  chmod 755 "$policy"
  own_policy=1
fi
cleanup() { if [ "$own_policy" = 1 ]; then rm -f "$policy"; fi; }
trap cleanup EXIT

apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"

# The munge postinst normally creates the key; make sure it exists.
if [ ! -s /etc/munge/munge.key ]; then
  mungekey --create --keyfile=/etc/munge/munge.key
  chown munge:munge /etc/munge/munge.key
  chmod 600 /etc/munge/munge.key
fi
echo "install-deps.sh: done"
