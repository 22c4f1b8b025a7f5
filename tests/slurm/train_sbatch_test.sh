#!/usr/bin/env bash
# ctest "slurm.train_sbatch": scripts/slurm/train.sbatch on a real single-host Slurm
# (scripts/slurm/local_slurm.sh, started in a fresh state dir and stopped again by a trap):
#   1. bad arguments get the usage message and exit 2 (without Slurm);
#   2. a job whose asteria-train fails (a missing data file) ends with srun's non-zero code and
#      is not requeued;
#   3. a plain scancel ends a job for good (not requeued);
#   4. preempt-requeue-resume: tiny SOAP, 20 steps, 2 tasks (srun --mpi=pmix, --overcommit on
#      2 cores), checkpoint every 4 steps. Mid-run the job gets `scancel --signal=USR1` (to its
#      steps: every rank), checkpoints, exits 75 and requeues itself; its second run resumes and
#      gets `scancel --batch --signal=USR1` (to the batch shell, which forwards it through
#      srun), and requeues again; the third run finishes. Checked: the job COMPLETED with
#      Restarts=2 and exit 0, the log shows the three runs (the later two with --resume
#      latest, resuming from the steps where the earlier ones stopped), metrics.jsonl has
#      steps 1..20 exactly once each, and every step's loss is, as JSON text (shortest
#      round-trip, so bit for bit), the loss of an uninterrupted run of the same config under
#      plain `mpirun -np 2`.
#   tests/slurm/train_sbatch_test.sh ASTERIA_TRAIN_BINARY
# Jobs are submitted by a relative path from a directory outside the repository (so train.sbatch
# must find its repository through the job's Command), with the default output file
# (asteria-train-JOBID.out there). The job runs the repository's build/bin/asteria-train (found by train.sbatch itself) when
# that is ASTERIA_TRAIN_BINARY, else ASTERIA_BIN=its directory. Exit 0 "PASS", 1 "FAIL: why",
# 77 (skipped) only when Slurm or munge is not installed (scripts/setup.sh installs them).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd -P)
LOCAL_SLURM=$ROOT/scripts/slurm/local_slurm.sh
SBATCH_SCRIPT=$ROOT/scripts/slurm/train.sbatch
TRAIN=${1:?usage: $0 ASTERIA_TRAIN_BINARY}
TRAIN=$(cd "$(dirname "$TRAIN")" && pwd -P)/$(basename "$TRAIN")
WAIT_S=90          # the longest any one wait below may take
STEPS=20
T0=$SECONDS

say() { echo "train_sbatch_test: $*"; }
for b in slurmctld slurmd munged sbatch srun scontrol scancel squeue; do
  command -v "$b" >/dev/null || { say "SKIP: $b not installed (scripts/setup.sh installs slurm-wlm, munge)"; exit 77; }
done
fail_early() { say "FAIL: $*"; exit 1; }
[[ $(id -u) -eq 0 ]] || fail_early "needs root (local_slurm.sh runs munged as user munge, slurmd as root); ctest -LE slurm leaves it out"
[[ -x $TRAIN ]] || fail_early "$TRAIN is not an executable"
for b in mpirun perl; do command -v "$b" >/dev/null || fail_early "$b not found"; done

# shellcheck source=tests/slurm/cluster_fixture.sh
source "$ROOT/tests/slurm/cluster_fixture.sh"
unset ASTERIA_BIN
slurm_test_begin asteria-sbatch-test
WORK=$STATE/work
JOBS=$STATE/jobs
mkdir -p "$WORK" "$JOBS"
JOB=""
LOGS_AT_FAIL=("$JOBS/*.out" "$WORK/ref.log")

# --- 1. bad arguments (no Slurm needed)
expect_usage() {  # EXPECTED_EXIT MESSAGE ARGS...: train.sbatch outside a job
  local want=$1 msg=$2 out rc=0
  shift 2
  out=$(bash "$SBATCH_SCRIPT" "$@" 2>&1) || rc=$?
  ((rc == want)) || fail "train.sbatch $*: exit $rc, expected $want: $out"
  grep -qF -- "$msg" <<<"$out" || fail "train.sbatch $*: no '$msg' in: $out"
}
expect_usage 2 "no CONFIG given"
expect_usage 2 "usage: sbatch"
expect_usage 2 "unexpected argument '--steps'" configs/tiny-soap.yaml --steps 3
expect_usage 2 "is not key=value" configs/tiny-soap.yaml --set train.steps
expect_usage 2 "needs a key=value" configs/tiny-soap.yaml --set
expect_usage 2 "the first argument must be the CONFIG" --set train.steps=3
expect_usage 2 "not inside a Slurm job" configs/tiny-soap.yaml --set train.steps=3
expect_usage 0 "usage: sbatch" --help
say "bad arguments: usage message, exit 2"

# --- the data and the uninterrupted reference (plain mpirun, 2 ranks), while the cluster starts
# A learnable synthetic language over 512 ids (as tests/integration's write_bigram_tokens).
perl -e 'srand(3); my $t = 1; my @o; for (1 .. 40000) { if (rand() < 0.1) { $t = int(rand(512)) } else { $t = ($t * 7 + 3) % 512 } push @o, $t } print pack("v*", @o)' \
  >"$WORK/train.bin" || fail "writing the token file"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset OMP_NUM_THREADS
CONFIG=$ROOT/configs/tiny-soap.yaml
# The job and the reference are compared bit for bit, so both run 2 threads per rank
# (runtime.threads): by default a rank takes the cores it is given, which differ between
# mpirun's binding (one core per rank at -np 2) and this Slurm's allocation, and BLAS rounds
# differently on another number of threads.
SETS=(--set "data.train=$WORK/train.bin" --set data.eval= --set "train.steps=$STEPS" --set train.warmup_steps=2
  --set train.micro_batch=4 --set optim.precondition_frequency=5 --set checkpoint.every=4 --set distributed.fsdp=none
  --set runtime.threads=2)
timeout "$WAIT_S" mpirun --oversubscribe -np 2 "$TRAIN" --config "$CONFIG" "${SETS[@]}" \
  --set "run.dir=$WORK/ref" </dev/null >"$WORK/ref.log" 2>&1 &
REF_PID=$!
KILL_AT_EXIT=("$REF_PID")   # the reference run, should the test end before it

# --- the cluster
start_test_cluster quiet
say "cluster up ($((SECONDS - T0)) s)"
# shellcheck disable=SC1091
source "$STATE/env.sh"
cd "$JOBS" || fail "cd $JOBS"
# Submitted by a relative path from another directory: train.sbatch finds its repository from
# the job's Command and SLURM_SUBMIT_DIR. The repository's build/bin when that is the binary
# under test, else ASTERIA_BIN.
REL_SCRIPT=$(realpath --relative-to="$JOBS" "$SBATCH_SCRIPT")
if [[ $ROOT/build/bin/asteria-train -ef $TRAIN ]]; then
  say "jobs run the repository's build/bin/asteria-train (found by train.sbatch)"
else
  export ASTERIA_BIN
  ASTERIA_BIN=$(dirname "$TRAIN")
  say "jobs run ASTERIA_BIN=$ASTERIA_BIN/asteria-train"
fi

job_field() {  # JOB FIELD: a field of scontrol show job
  timeout 10 scontrol -o show job "$1" 2>/dev/null | grep -oE "(^| )$2=[^ ]*" | head -n 1 | sed 's/^ *[^=]*=//'
}
# The output of job $1 without the progress line's redraws.
job_log() { tr '\r' '\n' <"$JOBS/asteria-train-$1.out" 2>/dev/null | grep -v $'^\e\\[Kstep'; }
# Whether job $1's log has a line matching grep's remaining arguments. (Not job_log | grep -q:
# with pipefail, grep -q leaving early can fail the pipeline through SIGPIPE.)
log_has() {
  local text
  text=$(job_log "$1")
  shift
  grep -q "$@" <<<"$text"
}
last_step() { tail -n 1 "$WORK/run/metrics.jsonl" 2>/dev/null | grep -oE '"step":[0-9]+' | cut -d: -f2; }

# --- 2. asteria-train fails (a missing data file: exit 1 on each rank, MPI_Abort): srun's code
# is passed through, and the job is not requeued
t=$SECONDS
rc=0
ejob=$(timeout "$WAIT_S" sbatch --wait --parsable -n 2 -O "$REL_SCRIPT" "$CONFIG" "${SETS[@]}" \
  --set "data.train=$WORK/missing.bin" --set "run.dir=$WORK/error" 2>"$WORK/error.sbatch") || rc=$?
ejob=$(head -n 1 <<<"$ejob")
[[ $ejob =~ ^[0-9]+$ ]] || fail "sbatch of the failing job answered '$ejob' $(cat "$WORK/error.sbatch")"
((rc != 0 && rc != 75)) || fail "a job whose asteria-train fails ended with exit $rc"
[[ $(job_field "$ejob" JobState) == FAILED && $(job_field "$ejob" Restarts) == 0 && $(job_field "$ejob" ExitCode) == "$rc:0" ]] ||
  fail "the failing job $ejob (sbatch --wait exit $rc): $(timeout 10 scontrol -o show job "$ejob")"
log_has "$ejob" "^train.sbatch: asteria-train exited with code $rc: not requeued" ||
  fail "the failing job's log lacks 'asteria-train exited with code $rc: not requeued'"
log_has "$ejob" "cannot open token file" || fail "the failing job's log lacks asteria-train's message"
say "a failing asteria-train: job exit $rc, FAILED, not requeued ($((SECONDS - t)) s)"

# --- 3. a plain scancel ends the job for good: never requeued, even when the ranks (SIGTERM
# to the tasks, while srun kills them) got a checkpoint written in time
t=$SECONDS
cjob=$(sbatch --parsable -n 2 -O "$REL_SCRIPT" "$CONFIG" "${SETS[@]}" --set "run.dir=$WORK/cancel") || fail "sbatch failed: $cjob"
for ((i = 0; i < WAIT_S * 5; i++)); do
  s=$(tail -n 1 "$WORK/cancel/metrics.jsonl" 2>/dev/null | grep -oE '"step":[0-9]+' | cut -d: -f2)
  [[ -n $s ]] && ((s >= 3)) && break
  st=$(job_field "$cjob" JobState)
  [[ -z $st || $st == @(RUNNING|PENDING|CONFIGURING) ]] || fail "job $cjob ended ($st) before step 3"
  sleep 0.2
done
{ [[ -n $s ]] && ((s >= 3)); } || fail "job $cjob did not reach step 3 within $WAIT_S s"
scancel "$cjob" || fail "scancel $cjob failed"
for ((i = 0; i < WAIT_S * 5; i++)); do
  st=$(job_field "$cjob" JobState)
  [[ $st == @(RUNNING|COMPLETING) ]] || break
  sleep 0.2
done
[[ $st == CANCELLED && $(job_field "$cjob" Restarts) == 0 ]] ||
  fail "job $cjob after scancel: $(timeout 10 scontrol -o show job "$cjob")"
log_has "$cjob" "^train.sbatch: requeued" && fail "job $cjob was requeued after a plain scancel"
say "a plain scancel: job CANCELLED, not requeued ($((SECONDS - t)) s)"

# --- 4. preempt, requeue, resume
t=$SECONDS
JOB=$(sbatch --parsable -n 2 -O "$REL_SCRIPT" "$CONFIG" "${SETS[@]}" --set "run.dir=$WORK/run") || fail "sbatch failed: $JOB"
[[ $JOB =~ ^[0-9]+$ ]] || fail "sbatch answered '$JOB'"

# JobState Reason Restarts of the job, from one scontrol call.
job_state() {
  local info
  info=$(timeout 10 scontrol -o show job "$JOB" 2>/dev/null)
  echo "$(grep -oE '(^| )JobState=[^ ]*' <<<"$info" | cut -d= -f2) $(grep -oE '(^| )Reason=[^ ]*' <<<"$info" |
    cut -d= -f2) $(grep -oE '(^| )Restarts=[^ ]*' <<<"$info" | cut -d= -f2)"
}
# A requeued job is held ~2 minutes (squeue reason BeginTime); it is let go, but only after it
# has been pending for 2 s: slurmd refuses to launch a job within the second in which its
# previous run's credential was revoked ("Job credential revoked"; the job then FAILS).
HELD_POLLS=0
release_if_held() {  # the output of job_state
  if [[ $1 == "PENDING BeginTime "* ]]; then
    HELD_POLLS=$((HELD_POLLS + 1))
    ((HELD_POLLS % 10 == 0)) && timeout 10 scontrol update jobid="$JOB" starttime=now >/dev/null 2>&1
  else
    HELD_POLLS=0
  fi
  return 0
}
# Waits until run RESTARTS + 1 of the job runs and metrics.jsonl reaches step MIN_STEP.
wait_running() {
  local restarts=$1 min_step=$2 i st s
  for ((i = 0; i < WAIT_S * 5; i++)); do
    st=$(job_state)
    release_if_held "$st"
    if [[ $st == "RUNNING "*" $restarts" ]]; then
      s=$(last_step)
      [[ -n $s ]] && ((s >= min_step)) && return 0
    fi
    [[ $st == @(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY)* ]] &&
      fail "job $JOB ended ($st) while waiting for run $((restarts + 1)) to reach step $min_step"
    sleep 0.2
  done
  fail "job $JOB: run $((restarts + 1)) did not reach step $min_step within $WAIT_S s (state: $st, metrics at step $(last_step))"
}
# The step at which run N (1-based) stopped, from its "stopped by signal" line, once the log
# says the job was requeued (within 10 s of Slurm counting restart N).
stopped_at() {
  local n=$1 i s text seen=-1
  for ((i = 0; i < WAIT_S * 5; i++)); do
    text=$(job_log "$JOB")
    s=$(grep -oE '^stopped by signal 10 after step [0-9]+' <<<"$text" | sed -n "${n}p" | grep -oE '[0-9]+$')
    if [[ -n $s && $(grep -c "^train.sbatch: requeued" <<<"$text") == "$n" ]]; then echo "$s"; return 0; fi
    ((seen < 0)) && [[ $(job_state) == *" $n" ]] && seen=$i
    ((seen >= 0 && i - seen > 50)) && { echo "requeued (Restarts=$n), but the job's log does not say so" >&2; return 1; }
    sleep 0.2
  done
  return 1
}

wait_running 0 5
scancel --signal=USR1 "$JOB" || fail "scancel --signal=USR1 $JOB failed"
S1=$(stopped_at 1) || fail "run 1 did not stop on SIGUSR1 and requeue within $WAIT_S s"
say "run 1: scancel --signal=USR1 (the steps), stopped after step $S1, requeued ($((SECONDS - t)) s)"
((S1 < STEPS - 3)) || fail "run 1 stopped at step $S1, too late to test a resume"
wait_running 1 $((S1 + 3))
scancel --batch --signal=USR1 "$JOB" || fail "scancel --batch --signal=USR1 $JOB failed"
S2=$(stopped_at 2) || fail "run 2 did not stop on SIGUSR1 to the batch shell and requeue within $WAIT_S s"
say "run 2: scancel --batch --signal=USR1 (the batch shell), stopped after step $S2, requeued ($((SECONDS - t)) s)"
((S2 < STEPS)) || fail "run 2 stopped at step $S2, the last: nothing left to resume"

st=""
for ((i = 0; i < WAIT_S * 5; i++)); do
  full=$(job_state)
  release_if_held "$full"
  st=${full%% *}
  [[ $st == @(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) ]] && break
  sleep 0.2
done
say "job $JOB: $st, Restarts=$(job_field "$JOB" Restarts), ExitCode=$(job_field "$JOB" ExitCode) ($((SECONDS - t)) s)"
[[ $st == COMPLETED ]] || fail "job $JOB is $st, not COMPLETED"
[[ $(job_field "$JOB" Restarts) == 2 ]] || fail "job $JOB: Restarts=$(job_field "$JOB" Restarts), expected 2"
[[ $(job_field "$JOB" ExitCode) == 0:0 ]] || fail "job $JOB: ExitCode=$(job_field "$JOB" ExitCode)"

# The log: three runs, the later two resuming where the earlier ones stopped.
LOGTEXT=$(job_log "$JOB")
runs=$(grep -oE '^train\.sbatch: job [0-9]+ run [0-9]+ \(SLURM_RESTART_COUNT=[0-9]+\)' <<<"$LOGTEXT" | tr '\n' '|')
want="train.sbatch: job $JOB run 1 (SLURM_RESTART_COUNT=0)|train.sbatch: job $JOB run 2 (SLURM_RESTART_COUNT=1)|train.sbatch: job $JOB run 3 (SLURM_RESTART_COUNT=2)|"
[[ $runs == "$want" ]] || fail "the job's runs were '$runs'"
SRUNS=$(grep -E '^train\.sbatch: srun ' <<<"$LOGTEXT")
resumes=$(grep -E -- ' --resume latest$' <<<"$SRUNS" | tr '\n' '|')
[[ $resumes == "$(sed -n '2,3p' <<<"$SRUNS" | tr '\n' '|')" && $(grep -c . <<<"$SRUNS") == 3 ]] ||
  fail "expected three srun commands, --resume latest in the last two only: $SRUNS"
log_has "$JOB" "^train.sbatch: got SIGUSR1: asking asteria-train to checkpoint" || fail "the batch shell did not report forwarding SIGUSR1"
for s in "$S1" "$S2"; do
  log_has "$JOB" -F "resuming from $WORK/run/checkpoints/$(printf 'step%08d' "$s") (step $s)" ||
    fail "no run resumed from the checkpoint of step $s"
done
log_has "$JOB" "^done: $STEPS steps" || fail "the last run did not report 'done: $STEPS steps'"
log_has "$JOB" "^train.sbatch: asteria-train finished (exit 0)" || fail "the last run did not finish with exit 0"

# metrics.jsonl: steps 1..STEPS exactly once, in order; losses bit for bit those of the reference.
wait "$REF_PID"
rc=$?
KILL_AT_EXIT=()
((rc == 0)) || fail "the uninterrupted mpirun reference run failed (exit $rc)"
steps=$(grep -oE '"step":[0-9]+' "$WORK/run/metrics.jsonl" | cut -d: -f2 | tr '\n' ' ')
[[ $steps == "$(seq -s ' ' 1 "$STEPS") " ]] || fail "metrics.jsonl steps are '$steps', expected 1..$STEPS once each"
grep -oE '"loss":[^,}]+' "$WORK/run/metrics.jsonl" >"$WORK/run.loss"
grep -oE '"loss":[^,}]+' "$WORK/ref/metrics.jsonl" >"$WORK/ref.loss"
[[ $(wc -l <"$WORK/ref.loss") == "$STEPS" ]] || fail "the reference has $(wc -l <"$WORK/ref.loss") losses, expected $STEPS"
d=$(diff "$WORK/ref.loss" "$WORK/run.loss") || fail "losses differ from the uninterrupted run (< reference, > requeued): $d"
say "metrics.jsonl: steps 1..$STEPS once each; every loss equals the uninterrupted mpirun run's (stops after $S1 and $S2)"

started=0
"$LOCAL_SLURM" stop "$STATE" >/dev/null || fail "local_slurm.sh stop"
RESULT=PASS
