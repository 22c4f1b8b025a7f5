#!/usr/bin/env bash
# ctest "slurm.multi_node": a Slurm of two nodes (scripts/slurm/local_slurm.sh on the hosts of
# scripts/cluster/cluster.sh: slurmctld on node1, a slurmd on each host) running
# scripts/slurm/train.sbatch with `sbatch -N 2 --ntasks-per-node=2`:
#   1. a job runs its 4 ranks on both nodes (hybrid: sharded in each node, replicated across)
#      and completes;
#   2. a --requeue job whose node2 fails mid-run (its slurmd and every process of the host killed):
#      asteria-train exits 76 (a rank lost), Slurm declares node2 down and requeues the job, which
#      runs again once node2 is back (its slurmd started again), resumes from its newest
#      checkpoint and ends on the losses of the uninterrupted job of 1, bit for bit.
#   tests/slurm/multi_node_test.sh ASTERIA_TRAIN
# Exit 0 and "PASS", 1 and "FAIL: why", 77 (skipped) when not root or Slurm is not installed.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd -P)
LOCAL_SLURM=$ROOT/scripts/slurm/local_slurm.sh
CLUSTER=$ROOT/scripts/cluster/cluster.sh
TRAIN=${1:?usage: $0 ASTERIA_TRAIN}
TRAIN=$(cd "$(dirname "$TRAIN")" && pwd -P)/$(basename "$TRAIN")
T0=$SECONDS
say() { echo "multi_node_test: $*"; }
if [[ $(id -u) -ne 0 ]]; then say "SKIP: needs root (network namespaces, slurmd)"; exit 77; fi
for b in slurmctld slurmd munged sbatch ip nsenter; do
  command -v "$b" >/dev/null || { say "SKIP: $b not installed (scripts/setup.sh installs it)"; exit 77; }
done

# shellcheck source=tests/slurm/cluster_fixture.sh
source "$ROOT/tests/slurm/cluster_fixture.sh"
slurm_test_begin asteria-slurm-nodes
export ASTERIA_CLUSTER_DIR=$STATE/hosts ASTERIA_CLUSTER_PREFIX=as$(($$ % 100000)) ASTERIA_SLURM_CLUSTER=$STATE/hosts
export ASTERIA_BIN
ASTERIA_BIN=$(dirname "$TRAIN")
LOGS_AT_FAIL=("$STATE/jobs/*.out" "$STATE/log/slurmd.*.log")
# The hosts go with the test, after Slurm's daemons.
AFTER_STOP=('"$CLUSTER" down')
"$CLUSTER" up 2 >/dev/null || fail "cluster.sh up 2"
start_test_cluster quiet
# shellcheck disable=SC1091
source "$STATE/env.sh"
say "2 hosts, Slurm up ($((SECONDS - T0)) s)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset OMP_NUM_THREADS
JOBS=$STATE/jobs
mkdir -p "$JOBS"
cd "$JOBS" || fail "cd $JOBS"
perl -e 'srand(3); my $t = 1; my @o; for (1 .. 40000) { if (rand() < 0.1) { $t = int(rand(512)) } else { $t = ($t * 7 + 3) % 512 } push @o, $t } print pack("v*", @o)' \
  >"$JOBS/train.bin" || fail "writing the token file"
on1() { "$CLUSTER" run node1 "$@"; }
# Both jobs are compared bit for bit: the same threads per rank (runtime.threads).
SETS=(--set "data.train=$JOBS/train.bin" --set data.eval= --set train.steps=15 --set train.warmup_steps=2
  --set train.micro_batch=2 --set optim.precondition_frequency=3 --set runtime.mode=asteria --set distributed.fsdp=hybrid
  --set checkpoint.every=3 --set distributed.timeout_s=10 --set runtime.threads=2)
job_field() { on1 timeout 10 scontrol -o show job "$1" 2>/dev/null | grep -oE "(^| )$2=[^ ]*" | head -n 1 | sed 's/^ *[^=]*=//'; }
losses() { grep -oE '"loss":[^,]*' "$1/metrics.jsonl" | cut -d: -f2 | tr '\n' ' '; }
step_of() { tail -n 1 "$1/metrics.jsonl" 2>/dev/null | grep -oE '"step":[0-9]+' | cut -d: -f2; }

# --- 1. two nodes, uninterrupted
t=$SECONDS
rc=0
timeout 300 "$CLUSTER" run node1 sbatch --wait --quiet -N 2 --ntasks-per-node=2 -O -o "$JOBS/straight.out" \
  "$ROOT/scripts/slurm/train.sbatch" "$ROOT/configs/tiny-soap.yaml" "${SETS[@]}" --set "run.dir=$JOBS/straight" || rc=$?
((rc == 0)) || fail "the two-node job exited $rc: $(tail -5 "$JOBS/straight.out")"
grep -q "2 node(s), 4 task(s)" "$JOBS/straight.out" || fail "the job did not run on 2 nodes: $(grep train.sbatch "$JOBS/straight.out")"
[[ $(step_of "$JOBS/straight") == 15 ]] || fail "the two-node job ended at step $(step_of "$JOBS/straight")"
say "1. sbatch -N 2 --ntasks-per-node=2: completed on node1 and node2 ($((SECONDS - t)) s)"

# --- 2. node2 fails mid-run; the job is requeued, resumes and ends on the same losses
t=$SECONDS
job=$(on1 sbatch --parsable --requeue -N 2 --ntasks-per-node=2 -O -o "$JOBS/failed.out" \
  "$ROOT/scripts/slurm/train.sbatch" "$ROOT/configs/tiny-soap.yaml" "${SETS[@]}" --set "run.dir=$JOBS/failed") ||
  fail "sbatch of the job to fail: $job"
job=$(head -n 1 <<<"$job")
for ((i = 0; i < 600; i++)); do
  s=$(step_of "$JOBS/failed")
  [[ -n $s ]] && ((s >= 7)) && break
  sleep 0.2
done
[[ -n ${s:-} ]] && ((s >= 7)) || fail "the job did not reach step 7: $(tail -5 "$JOBS/failed.out")"
kill -9 "$(<"$STATE/pids/slurmd-node2.pid")" 2>/dev/null
for p in $(ip netns pids "$ASTERIA_CLUSTER_PREFIX-node2"); do kill -9 "$p" 2>/dev/null; done
killed=$SECONDS
for ((i = 0; i < 150; i++)); do
  [[ $(job_field "$job" Restarts) == 1 ]] && break
  sleep 1
done
[[ $(job_field "$job" Restarts) == 1 ]] || fail "job $job was not requeued after node2 failed: $(on1 scontrol -o show job "$job")"
say "node2 failed at step $s; job $job requeued $((SECONDS - killed)) s later"
grep -q "asteria-train lost a rank, host or link (exit 76" "$JOBS/failed.out" ||
  fail "the job's log lacks asteria-train's exit 76: $(grep train.sbatch "$JOBS/failed.out")"
"$LOCAL_SLURM" start "$STATE" >/dev/null || fail "starting node2's slurmd again"
for ((i = 0; i < 300; i++)); do
  st=$(job_field "$job" JobState)
  [[ $st == COMPLETED || $st == FAILED || $st == CANCELLED ]] && break
  sleep 1
done
[[ $st == COMPLETED ]] || fail "job $job is $st after node2 came back: $(grep train.sbatch "$JOBS/failed.out" | tail -3)"
grep -q "run 2 (SLURM_RESTART_COUNT=1)" "$JOBS/failed.out" || fail "no second run in the job's log"
[[ $(losses "$JOBS/failed") == "$(losses "$JOBS/straight")" ]] ||
  fail "failed and resumed: $(losses "$JOBS/failed"); uninterrupted: $(losses "$JOBS/straight")"
say "2. node2 failed mid-run: requeued, resumed on both nodes, the uninterrupted job's losses bit for bit ($((SECONDS - t)) s)"
RESULT=PASS
