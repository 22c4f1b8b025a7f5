#!/usr/bin/env bash
# ctest "slurm.local_cluster": a real single-host Slurm (scripts/slurm/local_slurm.sh) in a temp
# state dir, and batch jobs on it:
#   1. sbatch --wait -n 2: srun --mpi=pmix of an MPI program (rank/size, Allreduce checked)
#   2. sbatch --wait -n 2: Open MPI's mpirun inside the allocation
#   3. sbatch --wait -n 4 --overcommit: 4 ranks on the cores there are (oversubscribed)
#   4. a --requeue job whose step gets scancel --signal=TERM, exits 75 (as asteria-train does
#      after its checkpoint), and the job requeues itself; its second run sees
#      SLURM_RESTART_COUNT=1 and completes
# and start/status/stop of the cluster itself (a second start says "already running"; stop
# ends exactly the recorded daemons). The daemons it started are always stopped (trap on EXIT).
#   tests/slurm/local_slurm_test.sh MPI_RANKS_BINARY
# Exit 0 and "PASS" on success, 1 and "FAIL: why" otherwise, 77 (skipped) when not root or Slurm
# is not installed (scripts/setup.sh installs it).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd -P)
LOCAL_SLURM=$ROOT/scripts/slurm/local_slurm.sh
MPI_RANKS=${1:?usage: $0 MPI_RANKS_BINARY}
MPI_RANKS=$(cd "$(dirname "$MPI_RANKS")" && pwd -P)/$(basename "$MPI_RANKS")
JOB_TIMEOUT_S=120
T0=$SECONDS

say() { echo "local_slurm_test: $*"; }
if [[ $(id -u) -ne 0 ]]; then say "SKIP: needs root (munged runs as user munge, slurmd as root)"; exit 77; fi
for b in slurmctld slurmd munged sbatch mpirun; do
  command -v "$b" >/dev/null || { say "SKIP: $b not installed (scripts/setup.sh installs slurm-wlm, munge)"; exit 77; }
done
[[ -x $MPI_RANKS ]] || { say "FAIL: $MPI_RANKS is not an executable"; exit 1; }

# shellcheck source=tests/slurm/cluster_fixture.sh
source "$ROOT/tests/slurm/cluster_fixture.sh"
slurm_test_begin asteria-slurm-test
LOGS_AT_FAIL=("$STATE/jobs/*.out")

# --- the cluster
start_test_cluster
out=$("$LOCAL_SLURM" start "$STATE" 2>&1) || { echo "$out"; fail "a second start failed"; }
grep -q "already running" <<<"$out" || { echo "$out"; fail "a second start did not say 'already running'"; }
"$LOCAL_SLURM" status "$STATE" >/dev/null || fail "status says the cluster is not running"
# shellcheck disable=SC1091
source "$STATE/env.sh"
[[ $SLURM_CONF == "$STATE/slurm.conf" ]] || fail "env.sh does not set SLURM_CONF"
declare -A PIDS
for d in munged slurmctld slurmd; do PIDS[$d]=$(<"$STATE/pids/$d.pid"); done
# Jobs inherit this environment (sbatch --export=ALL); Open MPI refuses root without these.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
JOBS=$STATE/jobs
mkdir -p "$JOBS"
cd "$JOBS" || fail "cd $JOBS"

# Runs `sbatch --wait` (bounded) of a script; the job's output is JOBS/NAME.out.
submit_wait() {
  local name=$1; shift
  local t=$SECONDS rc=0
  timeout "$JOB_TIMEOUT_S" sbatch --wait --quiet -J "$name" -o "$JOBS/$name.out" "$@" || rc=$?
  say "job $name: exit $rc in $((SECONDS - t)) s"
  return "$rc"
}

# The output of mpi_ranks must have exactly ranks 0..N-1 of size N, each with the right sum.
check_ranks() {
  local name=$1 n=$2 r
  local f=$JOBS/$name.out
  grep -q WRONG "$f" && fail "job $name: a wrong Allreduce sum: $(grep WRONG "$f")"
  [[ $(grep -c "^mpi_ranks: rank [0-9]* size $n host .* OK$" "$f") -eq $n ]] ||
    fail "job $name: expected $n ranks of size $n with the right sum, got: $(grep mpi_ranks "$f" | tr '\n' '|')"
  for ((r = 0; r < n; r++)); do
    grep -q "^mpi_ranks: rank $r size $n .* sum $((n * (n + 1) / 2)) expected $((n * (n + 1) / 2)) OK$" "$f" ||
      fail "job $name: rank $r missing or wrong"
  done
  say "job $name: $n ranks, Allreduce sum right"
}

# --- 1. srun --mpi=pmix
cat >"$JOBS/pmix.sh" <<EOF
#!/bin/bash
srun --mpi=pmix "$MPI_RANKS"
EOF
submit_wait pmix -n 2 "$JOBS/pmix.sh" || fail "job pmix (srun --mpi=pmix) failed"
check_ranks pmix 2

# --- 2. mpirun inside the allocation
cat >"$JOBS/mpirun.sh" <<EOF
#!/bin/bash
mpirun --oversubscribe -np "\$SLURM_NTASKS" "$MPI_RANKS"
EOF
submit_wait mpirun -n 2 "$JOBS/mpirun.sh" || fail "job mpirun (mpirun inside the allocation) failed"
check_ranks mpirun 2

# --- 3. more ranks than CPUs
cat >"$JOBS/overcommit.sh" <<EOF
#!/bin/bash
srun --mpi=pmix "$MPI_RANKS"
EOF
submit_wait overcommit -n 4 --overcommit "$JOBS/overcommit.sh" || fail "job overcommit (-n 4 -O) failed"
check_ranks overcommit 4

# --- 4. SIGTERM to the step, exit 75, the job requeues itself, the second run completes
cat >"$JOBS/requeue.sh" <<EOF
#!/bin/bash
echo "run \${SLURM_RESTART_COUNT:-0}" >>"$JOBS/requeue.runs"
if [[ \${SLURM_RESTART_COUNT:-0} -ge 1 ]]; then echo "second run: done"; exit 0; fi
srun -n 1 --mpi=none bash -c 'trap "echo step got TERM; exit 75" TERM; touch "$JOBS/requeue.ready"; while :; do sleep 0.1; done'
rc=\$?
echo "step exit \$rc" >>"$JOBS/requeue.runs"
if [[ \$rc -eq 75 ]]; then scontrol requeue "\$SLURM_JOB_ID"; sleep 60; fi
exit \$rc
EOF
t=$SECONDS
job=$(sbatch --parsable --requeue -J requeue -o "$JOBS/requeue.out" --open-mode=append "$JOBS/requeue.sh") ||
  fail "sbatch of the requeue job failed"
# Wait until the step runs with its trap set, then signal the steps (not the batch shell).
for ((i = 0; i < JOB_TIMEOUT_S * 10; i++)); do [[ -e $JOBS/requeue.ready ]] && break; sleep 0.1; done
[[ -e $JOBS/requeue.ready ]] || fail "job requeue: its step never started"
scancel --signal=TERM "$job" || fail "scancel --signal=TERM $job failed"
# A requeued job waits ~2 minutes (BeginTime) before it may start again: once it has been
# pending for 2 s, make it eligible now. (Not at once: slurmd refuses to launch a job within the
# second in which its previous run's credential was revoked, "Job credential revoked", and the
# job then fails.)
state=""
held=0
for ((i = 0; i < JOB_TIMEOUT_S * 5; i++)); do
  state=$(squeue -h -j "$job" -o '%T %r' 2>/dev/null || true)
  if [[ $state == "PENDING BeginTime" ]]; then
    held=$((held + 1))
    ((held % 10 == 0)) && { scontrol update jobid="$job" starttime=now || true; }
  fi
  [[ -z $state ]] && break
  sleep 0.2
done
info=$(scontrol -o show job "$job" 2>/dev/null || true)
say "job requeue: $(grep -oE 'JobState=[A-Z_]+|Restarts=[0-9]+|ExitCode=[0-9:]+' <<<"$info" | tr '\n' ' ')in $((SECONDS - t)) s"
[[ -z $state ]] || fail "job requeue: still '$state' after ${JOB_TIMEOUT_S} s"
runs=$(tr '\n' '|' <"$JOBS/requeue.runs")
[[ $runs == "run 0|step exit 75|run 1|" ]] || fail "job requeue: runs were '$runs', expected 'run 0|step exit 75|run 1|'"
grep -q "step got TERM" "$JOBS/requeue.out" || fail "job requeue: the step did not report the TERM"
grep -q "JobState=COMPLETED" <<<"$info" || fail "job requeue: not COMPLETED: $info"
grep -q "Restarts=1" <<<"$info" || fail "job requeue: not restarted exactly once: $info"

# --- stop ends exactly the daemons it started
started=0
"$LOCAL_SLURM" stop "$STATE" || fail "local_slurm.sh stop"
for d in munged slurmctld slurmd; do
  st=$(awk '{print $3}' "/proc/${PIDS[$d]}/stat" 2>/dev/null || true)
  [[ -z $st || $st == Z ]] || fail "$d (pid ${PIDS[$d]}) still running after stop"
done
if "$LOCAL_SLURM" status "$STATE" >/dev/null; then fail "status says running after stop"; fi
RESULT=PASS
