# Sourced by the Slurm tests: a local cluster (scripts/slurm/local_slurm.sh) in a fresh state dir
# that is always stopped again, and the tests' PASS / FAIL ending. The test defines say() and
# LOCAL_SLURM first, then:
#   slurm_test_begin PREFIX        STATE=$(mktemp -d /tmp/PREFIX.XXXXXX), traps set
#   start_test_cluster [quiet]     the daemons up (a watchdog stops them should the test be
#                                  killed outright, e.g. by ctest's timeout); prints start's
#                                  output (quiet: only when it fails)
#   fail WHY...                    ends the test with "FAIL: WHY" (state kept for a look)
#   RESULT=PASS                    before the test exits 0
# KILL_AT_EXIT (pids) are killed at the end; AFTER_STOP (commands) run once the cluster is
# stopped; LOGS_AT_FAIL (file globs, expanded then: the files may not exist yet when they are
# named) are shown, tails, when the test fails.
KILL_AT_EXIT=()
AFTER_STOP=()
LOGS_AT_FAIL=()

slurm_test_begin() {
  # Nothing of a Slurm job ctest may run inside leaks into this cluster's jobs.
  while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(SLURM_|SBATCH_|SRUN_|SALLOC_|SQUEUE_)' || true)
  STATE=$(mktemp -d "/tmp/$1.XXXXXX")
  RESULT=FAIL
  WHY="interrupted"
  started=0
  WATCHDOG=""
  trap slurm_test_end EXIT
  trap 'WHY="interrupted by a signal"; exit 1' INT TERM
}

slurm_test_end() {
  local rc=$?
  trap - EXIT INT TERM
  [[ -n $WATCHDOG ]] && kill "$WATCHDOG" 2>/dev/null
  local p
  for p in "${KILL_AT_EXIT[@]}"; do [[ -n $p ]] && kill "$p" 2>/dev/null; done
  if ((started)); then "$LOCAL_SLURM" stop "$STATE" >/dev/null 2>&1 || say "stopping the cluster failed"; fi
  local c
  for c in "${AFTER_STOP[@]}"; do eval "$c" >/dev/null 2>&1 || say "'$c' failed"; done
  if [[ $RESULT == PASS ]]; then
    rm -rf "$STATE"
    say "PASS ($((SECONDS - T0)) s)"
    exit 0
  fi
  local f
  # shellcheck disable=SC2068  # the globs expand here
  for f in "$STATE"/log/slurmctld.log "$STATE"/log/slurmd*.log ${LOGS_AT_FAIL[@]}; do
    [[ -s $f ]] && { echo "----- tail of $f"; tr '\r' '\n' <"$f" | grep -v $'^\e\\[Kstep' | tail -n 40; }
  done
  say "FAIL: $WHY (state kept in $STATE)"
  exit $((rc == 0 ? 1 : rc))
}

fail() { WHY=$*; exit 1; }

start_test_cluster() {
  # shellcheck disable=SC2016  # expanded by the watchdog's shell
  setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; "$2" stop "$3"' watchdog $$ "$LOCAL_SLURM" "$STATE" \
    </dev/null >/dev/null 2>&1 &
  WATCHDOG=$!
  started=1
  local out
  out=$("$LOCAL_SLURM" start "$STATE" 2>&1) || { echo "$out"; fail "local_slurm.sh start"; }
  [[ ${1:-} == quiet ]] || echo "$out"
}
