#!/usr/bin/env bash
# ctest "slurm.requeue_memory": a job requeued onto a node with less memory resumes there, placed
# for that node, and back. A Slurm of two nodes (scripts/slurm/local_slurm.sh on the hosts of
# scripts/cluster/cluster.sh) whose node2 runs its slurmd, and so its jobs, in a memory cgroup
# (ASTERIA_SLURM_NODE_MEMORY) sized so that tiny SOAP at micro-batch 128 must split its micro-batch
# there (runtime.placement auto, the global batch kept). The job starts on node1 (node2 drained),
# checkpoints, gets `scancel --signal=USR1` while node1 is drained and node2 resumed: it requeues
# itself, runs on node2, resumes and says what placement changed (train.micro_batch 512 -> ...);
# then the same the other way. Checked: the job COMPLETED with Restarts=2, ran on node1, node2,
# node1, steps 1..12 each once, the first run's losses those of an uninterrupted run bit for bit and
# every loss within 1e-3 of it (the micro-batch split rounds the gradient sums another way).
#   tests/slurm/requeue_memory_test.sh ASTERIA_TRAIN
# Exit 0 and "PASS", 1 and "FAIL: why", 77 (skipped) when not root, Slurm is not installed or
# there is no cgroup memory controller.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd -P)
LOCAL_SLURM=$ROOT/scripts/slurm/local_slurm.sh
CLUSTER=$ROOT/scripts/cluster/cluster.sh
TRAIN=${1:?usage: $0 ASTERIA_TRAIN}
TRAIN=$(cd "$(dirname "$TRAIN")" && pwd -P)/$(basename "$TRAIN")
T0=$SECONDS
say() { echo "requeue_memory_test: $*"; }
if [[ $(id -u) -ne 0 ]]; then say "SKIP: needs root (network namespaces, slurmd, cgroups)"; exit 77; fi
for b in slurmctld slurmd munged sbatch ip nsenter; do
  command -v "$b" >/dev/null || { say "SKIP: $b not installed (scripts/setup.sh installs it)"; exit 77; }
done
grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null || [[ -d /sys/fs/cgroup/memory ]] ||
  { say "SKIP: no cgroup memory controller"; exit 77; }

# shellcheck source=tests/slurm/cluster_fixture.sh
source "$ROOT/tests/slurm/cluster_fixture.sh"
slurm_test_begin asteria-slurm-mem
export ASTERIA_CLUSTER_DIR=$STATE/hosts ASTERIA_CLUSTER_PREFIX=am$(($$ % 100000)) ASTERIA_SLURM_CLUSTER=$STATE/hosts
export ASTERIA_BIN
ASTERIA_BIN=$(dirname "$TRAIN")
JOBS=$STATE/jobs
mkdir -p "$JOBS"
LOGS_AT_FAIL=("$JOBS/*.out" "$STATE/log/slurmd.*.log")
AFTER_STOP=('"$CLUSTER" down')
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset OMP_NUM_THREADS
perl -e 'srand(3); my $t = 1; my @o; for (1 .. 200000) { if (rand() < 0.1) { $t = int(rand(512)) } else { $t = ($t * 7 + 3) % 512 } push @o, $t } print pack("v*", @o)' \
  >"$JOBS/train.bin" || fail "writing the token file"
SETS=(--set "data.train=$JOBS/train.bin" --set data.eval= --set train.steps=12 --set train.warmup_steps=2
  --set train.micro_batch=512 --set optim.precondition_frequency=3 --set checkpoint.every=2 --set runtime.threads=2)

# node2 starts with plenty (2 GiB); once Slurm is up the test measures what a task of that size
# is charged there at its start (a one-step run on node2: its placement line names the room it
# finds beside what it holds) and lowers node2's limit to that, some 30 MiB for the batch job's
# shell and srun, and room for 300 MiB of the run: there placement must split the micro-batch (the
# run is estimated at 587 MiB at 512, 357 MiB with everything else placement does, 202 MiB at 256;
# placement fills 90 % of the room, and the rest covers what the estimate leaves out).
export ASTERIA_SLURM_NODE_MEMORY="node2=2147483648"
"$CLUSTER" up 2 >/dev/null || fail "cluster.sh up 2"
start_test_cluster quiet
# shellcheck disable=SC1091
source "$STATE/env.sh"
on1() { "$CLUSTER" run node1 "$@"; }
CGROUP=$(head -n 1 "$STATE/cgroups")
out=$(on1 timeout 60 srun -w node2 -N 1 -n 1 "$TRAIN" --config "$ROOT/configs/tiny-soap.yaml" "${SETS[@]}" \
  --set train.steps=1 --set checkpoint.enabled=false --set "run.dir=$JOBS/calibrate" 2>&1) || fail "the step on node2: $out"
room=$(grep -m1 -oE "needs about [0-9.]+ MiB of [0-9.]+ (MiB|GiB) \(cgroup" <<<"$out" | awk '{printf "%d", $6 * ($7 == "GiB" ? 1024 : 1)}')
[[ -n $room ]] || fail "node2's step names no cgroup room: $(grep placement <<<"$out")"
charged=$((2048 - room))   # what the run's room lacks of the limit (negative where it counts more)
NODE2_MEMORY=$(((charged + 30 + 300) << 20))
if [[ -f $CGROUP/memory.max ]]; then echo "$NODE2_MEMORY" >"$CGROUP/memory.max"; else echo "$NODE2_MEMORY" >"$CGROUP/memory.limit_in_bytes"; fi ||
  fail "lowering node2's cgroup limit"
say "2 hosts, Slurm up; a task starting on node2 is charged $charged MiB there: node2's cgroup now $((NODE2_MEMORY >> 20)) MiB ($((SECONDS - T0)) s)"
job_field() { on1 timeout 10 scontrol -o show job "$1" 2>/dev/null | grep -oE "(^| )$2=[^ ]*" | head -n 1 | sed 's/^ *[^=]*=//'; }
node() { on1 timeout 10 scontrol update nodename="$1" state="$2" ${3:+reason="$3"} || fail "scontrol update $1 $2"; }
step_of() { tail -n 1 "$1/metrics.jsonl" 2>/dev/null | grep -oE '"step":[0-9]+' | cut -d: -f2; }
losses() { grep -oE '"loss":[^,]*' "$1/metrics.jsonl" | cut -d: -f2; }
# Waits until the run's metrics reach step $2 (it is running on node $1 by then).
wait_step() {
  local s="" i
  for ((i = 0; i < 900; i++)); do
    s=$(step_of "$JOBS/run")
    [[ -n $s ]] && ((s >= $2)) && [[ $(job_field "$job" NodeList) == "$1" ]] && return 0
    sleep 0.2
  done
  fail "the job did not reach step $2 on $1 (at ${s:-none}, on $(job_field "$job" NodeList)): $(tail -5 "$JOBS/run.out")"
}
# Moves the job: the other node resumed, this one drained, the job signalled (it checkpoints,
# exits 75 and requeues itself; Slurm then starts it on the free node).
move_to() {
  local before i
  before=$(job_field "$job" Restarts)
  node "$1" resume
  node "$2" drain test
  on1 timeout 10 scancel --signal=USR1 "$job" || fail "scancel --signal=USR1 $job"
  # Slurm holds a requeued job back for a while before it may start again; not here.
  for ((i = 0; i < 300; i++)); do [[ $(job_field "$job" Restarts) != "$before" ]] && break; sleep 0.2; done
  on1 timeout 10 scontrol update jobid="$job" begintime=now >/dev/null 2>&1 || true
}

# The uninterrupted run, on this machine with all its memory, as the reference.
"$TRAIN" --config "$ROOT/configs/tiny-soap.yaml" "${SETS[@]}" --set "run.dir=$JOBS/straight" >"$JOBS/straight.log" 2>&1 ||
  fail "the uninterrupted run: $(tail -3 "$JOBS/straight.log")"

node node2 drain later
job=$(on1 sbatch --parsable --requeue -N 1 -n 1 -o "$JOBS/run.out" \
  "$ROOT/scripts/slurm/train.sbatch" "$ROOT/configs/tiny-soap.yaml" "${SETS[@]}" --set "run.dir=$JOBS/run") ||
  fail "sbatch: $job"
job=$(head -n 1 <<<"$job")
wait_step node1 3
move_to node2 node1
wait_step node2 7
grep -q "resuming with this machine's placement" "$JOBS/run.out" ||
  fail "the run on node2 did not say what placement changed: $(grep asteria-train "$JOBS/run.out" | tail -5)"
grep -qE "train.micro_batch: 512 -> (256|128|64|32|16|8|4|2|1)$" "$JOBS/run.out" ||
  fail "node2's placement kept micro-batch 512: $(grep -E 'placement|micro_batch' "$JOBS/run.out" | tail -5)"
say "requeued onto node2: $(grep -m1 -oE 'train.micro_batch: 512 -> [0-9]+' "$JOBS/run.out"), $(grep -m1 -oE 'train.grad_accum: 1 -> [0-9]+' "$JOBS/run.out")"
move_to node1 node2
for ((i = 0; i < 300; i++)); do
  st=$(job_field "$job" JobState)
  [[ $st == COMPLETED || $st == FAILED || $st == CANCELLED ]] && break
  sleep 1
done
[[ $st == COMPLETED ]] || fail "job $job is $st: $(grep train.sbatch "$JOBS/run.out" | tail -3)"
[[ $(job_field "$job" Restarts) == 2 ]] || fail "job $job restarted $(job_field "$job" Restarts) times, expected 2"
grep -qE "train.micro_batch: (256|128|64|32|16|8|4|2|1) -> 512$" "$JOBS/run.out" ||
  fail "back on node1 the micro-batch did not return to 512: $(grep micro_batch "$JOBS/run.out" | tail -3)"
[[ $(grep -oE '"step":[0-9]+' "$JOBS/run/metrics.jsonl" | cut -d: -f2 | tr '\n' ' ') == "1 2 3 4 5 6 7 8 9 10 11 12 " ]] ||
  fail "the run's steps: $(grep -oE '"step":[0-9]+' "$JOBS/run/metrics.jsonl" | tr '\n' ' ')"
/usr/bin/python3 - "$JOBS/straight" "$JOBS/run" <<'PY' || fail "losses against the uninterrupted run (above)"
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(d + "/metrics.jsonl")] for d in sys.argv[1:])
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
print(f"requeue_memory_test: against the uninterrupted run: steps 1-2 {'equal' if a[:2] == b[:2] else 'DIFFER'}, worst {worst:.3g}")
sys.exit(0 if a[:2] == b[:2] and worst < 1e-3 and len(a) == len(b) else 1)
PY
say "requeued onto node2 and back: completed, the losses followed the uninterrupted run ($((SECONDS - T0)) s)"
RESULT=PASS
