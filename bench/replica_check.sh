#!/usr/bin/env bash
# The cost of the replicas' check (distributed.check_every, train/replica_check.hpp): bench-small
# AdamW and SOAP (asteria) at W = 2 (mpirun -np 2, fsdp none: every rank a replica), with the
# check every step against never (0: only at the end), runs interleaved A B A B so that the
# machine's drift falls on both. Prints the check's own time per step (metrics.jsonl
# replica_check_s, rank 0) against the step, which is the cost (the step-time difference of the
# two runs is within this machine's noise), the median step time of each, and writes
# bench/results/replica-check/summary.md.
#   bench/replica_check.sh [STEPS] [REPEATS]      (defaults 30 and 2)
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-30}
REPEATS=${2:-2}
OUT=bench/results/replica-check
WORK=$(mktemp -d /tmp/asteria-replica-check.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cmake --build build -j2 --target asteria-train > /dev/null
source bench/common.sh
TOKENS=$(bench_tokens)
run() {  # CONFIG CHECK_EVERY NAME
  mpirun --oversubscribe -np 2 build/bin/asteria-train --config "configs/$1" --set "data.train=$TOKENS" --set data.eval= \
    --set train.micro_batch=4 --set "train.steps=$STEPS" --set checkpoint.enabled=false --set distributed.fsdp=none \
    --set runtime.mode=asteria --set "distributed.check_every=$2" --set "run.dir=$WORK/$3" > "$WORK/$3.log" 2>&1
}
median() {  # KEY RUN_DIRS...: the median of a metric over steps 3.. of all the runs
  /usr/bin/python3 - "$@" <<'PY'
import json, statistics, sys
t = [json.loads(l)[sys.argv[1]] for d in sys.argv[2:] for l in list(open(d + "/metrics.jsonl"))[2:]]
print(statistics.median(t))
PY
}
{
  echo "# The replicas' check: its cost per step"
  echo
  echo "bench/replica_check.sh $STEPS $REPEATS on $(lscpu | sed -n 's/^Model name: *//p') ($(nproc) cores), $(date -u +%F)."
  echo "bench-small, mpirun -np 2 (fsdp none, micro_batch 4 per rank: the configs' global batch), runtime.mode asteria,"
  echo "$STEPS steps, $REPEATS runs of each interleaved; median step time over steps 3.."
  echo
  echo "| config | the check (s) | step with it (s) | check / step | step without it (s) | with / without |"
  echo "| --- | --- | --- | --- | --- | --- |"
} > "$WORK/summary.md"
for config in bench-small-adamw.yaml bench-small-soap.yaml; do
  every=() never=()
  for r in $(seq "$REPEATS"); do
    run "$config" 1 "every-$r"; every+=("$WORK/every-$r")
    run "$config" 0 "never-$r"; never+=("$WORK/never-$r")
  done
  c=$(median replica_check_s "${every[@]}") a=$(median step_time_s "${every[@]}") b=$(median step_time_s "${never[@]}")
  printf '| %s | %.5f | %.4f | %.2f %% | %.4f | %.3f |\n' "$config" "$c" "$a" "$(/usr/bin/python3 -c "print(100 * $c / $a)")" \
    "$b" "$(/usr/bin/python3 -c "print($a / $b)")" >> "$WORK/summary.md"
  rm -rf "$WORK"/every-* "$WORK"/never-*
done
mkdir -p "$OUT"
cp "$WORK/summary.md" "$OUT/summary.md"
cat "$OUT/summary.md"
