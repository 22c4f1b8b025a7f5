#!/usr/bin/env bash
# OLMo-1B under a memory cgroup (as a Slurm job's --mem or a container's limit would put it):
# bench/olmo_1b_24g.sh's runs of the plain recipes, started inside a cgroup of LIMIT bytes that
# this script creates (cgroup v2 where its memory controller is available, else v1) and removes.
# runtime.memory_limit auto finds the cgroup's room and runtime.placement auto fits the run into
# it; the script reports the cgroup's peak usage and whether the kernel ever hit the limit
# (v1 failcnt / v2 events max, oom_kill).
#   bench/olmo_1b_cgroup.sh LIMIT [STEPS] [OPTIMIZERS]     e.g. 12G 1 soap
# Writes bench/results/olmo-1b-cgroup-<LIMIT>/ (bench/olmo_1b_24g.sh's summary and the cgroup's figures).
set -euo pipefail
cd "$(dirname "$0")/.."
LIMIT=${1:?usage: bench/olmo_1b_cgroup.sh LIMIT [STEPS] [OPTIMIZERS]}
STEPS=${2:-1}
OPTIMIZERS=${3:-soap}
NAME=asteria-bench-$$
if grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
  CG=/sys/fs/cgroup/$NAME; mkdir "$CG"; echo "$LIMIT" > "$CG/memory.max"; VERSION=v2
elif [[ -d /sys/fs/cgroup/memory ]]; then
  CG=/sys/fs/cgroup/memory/$NAME; mkdir "$CG"; echo "$LIMIT" > "$CG/memory.limit_in_bytes"; VERSION=v1
else
  echo "no cgroup memory controller here" >&2; exit 1
fi
trap 'rmdir "$CG" 2>/dev/null || true' EXIT
OUT=bench/results/olmo-1b-cgroup-$LIMIT
export ASTERIA_BENCH_OUT=$OUT ASTERIA_BENCH_RAW=runs/bench/olmo-1b-cgroup-$LIMIT
# The runs start in the cgroup: this subshell moves itself there first.
status=0
bash -c "echo \$\$ > '$CG/cgroup.procs' && exec bench/olmo_1b_24g.sh '$STEPS' '$OPTIMIZERS'" || status=$?
{
  echo
  echo "## the cgroup ($VERSION, limit $LIMIT)"
  if [[ $VERSION == v1 ]]; then
    echo "peak usage: $(( $(cat "$CG/memory.max_usage_in_bytes") >> 20 )) MiB; times the limit was hit (failcnt): $(cat "$CG/memory.failcnt"); $(grep oom_kill "$CG/memory.oom_control" || echo 'oom_kill n/a')"
  else
    echo "peak usage: $(( $(cat "$CG/memory.peak" 2>/dev/null || echo 0) >> 20 )) MiB; events: $(tr '\n' ' ' < "$CG/memory.events")"
  fi
  echo "bench/olmo_1b_24g.sh exit status: $status"
} | tee -a "$OUT/summary.md"
exit "$status"
