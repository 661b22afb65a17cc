#!/bin/sh
# gputopo's HealthCheckProgram: publishes this node's per-GPU health into its Slurm node Extra
# field (JSON under the "gputopo" key) with `gputopo publish`. Set in slurm.conf:
#
#   HealthCheckProgram=/usr/local/sbin/gputopo-healthcheck   # a copy of this script
#   HealthCheckInterval=60
#   HealthCheckNodeState=ANY
#
# slurmd runs it as root with only SLURMD_NODENAME in the environment and kills it after 60 s,
# so this script finds the rest itself:
#   - slurm.conf: $SLURM_CONF, else slurmd's `-f FILE`, else slurmd's own SLURM_CONF, else
#     Slurm's default (gputopo.conf and gres.conf are read next to it);
#   - scontrol: $GPUTOPO_SCONTROL, else the one installed with the parent slurmd
#     (sbin/slurmd -> bin/scontrol), else on PATH. The slurmd's own comes before PATH because a
#     host may carry two Slurm releases (say 22.05 in /usr/bin and 24.11 under a prefix): an
#     scontrol of another release than the daemons' fails to talk to them, so publishing fails;
#   - gputopo: $GPUTOPO_BIN, else on PATH, else /usr/local/bin/gputopo, else this checkout's
#     target/{release,debug}/gputopo.
# Keep NvmlTimeoutMs/1000 + PublishTimeoutSec (gputopo.conf) below slurmd's 60 s.
#
# Test harness hook: with GPUTOPO_FAKE_NVML_DIR set (by a wrapper script), the node's fake NVML
# fixture is $GPUTOPO_FAKE_NVML_DIR/$SLURMD_NODENAME.fx; a fixture with NoLibrary=yes means "this
# node has no NVML", so the agent is pointed at a library path that does not exist.
#
# Exit status: gputopo publish's (0 published or unchanged, 5 refused to overwrite a non-JSON
# Extra, 6 scontrol failed); slurmd logs a non-zero status as "health_check failed".
set -u
PATH=$PATH:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
node=${SLURMD_NODENAME:-$(hostname -s)}
parent=${PPID:-1}

if [ -z "${SLURM_CONF:-}" ] && [ -r "/proc/$parent/cmdline" ]; then
  conf=$(tr '\0' '\n' < "/proc/$parent/cmdline" | sed -n '/^-f$/{n;p;q;}')
  if [ -z "$conf" ]; then
    conf=$(tr '\0' '\n' < "/proc/$parent/environ" 2>/dev/null | sed -n 's/^SLURM_CONF=//p' | head -n 1)
  fi
  if [ -n "$conf" ]; then SLURM_CONF=$conf; export SLURM_CONF; fi
fi

if [ -z "${GPUTOPO_SCONTROL:-}" ]; then
  exe=$(readlink "/proc/$parent/exe" 2>/dev/null || true)
  exe=${exe% (deleted)}
  case ${exe##*/} in
    slurmd)
      sc=$(dirname "$(dirname "$exe")")/bin/scontrol
      if [ -x "$sc" ]; then
        GPUTOPO_SCONTROL=$sc
        export GPUTOPO_SCONTROL
      fi
      ;;
  esac
fi

if [ -n "${GPUTOPO_FAKE_NVML_DIR:-}" ]; then
  FAKE_NVML_FIXTURE=$GPUTOPO_FAKE_NVML_DIR/$node.fx
  export FAKE_NVML_FIXTURE
  if grep -qi 'NoLibrary=yes' "$FAKE_NVML_FIXTURE" 2>/dev/null; then
    GPUTOPO_NVML_LIB=/nonexistent/libnvidia-ml.so.1
    export GPUTOPO_NVML_LIB
  fi
fi

bin=${GPUTOPO_BIN:-}
if [ -z "$bin" ]; then
  bin=$(command -v gputopo 2>/dev/null || true)
fi
if [ -z "$bin" ]; then
  here=$(cd "$(dirname "$0")" && pwd)
  for b in /usr/local/bin/gputopo "$here/../target/release/gputopo" "$here/../target/debug/gputopo"; do
    if [ -x "$b" ]; then bin=$b; break; fi
  done
fi
if [ -z "$bin" ]; then
  echo "gputopo-healthcheck: no gputopo command found (set GPUTOPO_BIN)" >&2
  exit 1
fi
exec "$bin" publish --node "$node"
