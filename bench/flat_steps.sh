#!/usr/bin/env bash
# Flat steps with the shipped configs: bench-small with SOAP, Shampoo and KL-Shampoo, each in
# native mode (the reference: synchronous refreshes on the reference schedule) and in asteria
# mode with every other setting as shipped (stagger auto, the shadow pipeline's defaults), after
# AdamW as the baseline. Reports median, mean, p95/median and max of the step time after the
# warm-up, and asteria's mean against native's; then (bench/flat_steps_summary.py) the same
# split into the machine's noise (forward + backward alone) and the schedule's (the step time
# at each position of the refresh period).
#   bench/flat_steps.sh [STEPS] [OPTIMIZERS]       defaults: 120, "soap shampoo kl-shampoo"
#   SWEEP=bench-batch bench/flat_steps.sh 40        the configs/bench-batch-*.yaml family (bench/results/flat-steps-bench-batch/)
# Step times skip the lr warm-up (train.warmup_steps, 40): until then the second-order ones refresh
# synchronously in both modes (runtime.shadow.sync_steps defaults to the warm-up), staggered in
# asteria mode. 7 runs of 120 steps take about 50 min on 2 cores; finished runs are kept, so
# running it again continues where it stopped.
# Raw runs go under runs/bench/flat-steps/ (gitignored); bench/results/flat-steps/ gets the summary.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-120}
OPTIMIZERS=${2:-soap shampoo kl-shampoo}
SWEEP=${SWEEP:-bench-small}
SUFFIX=""; [[ $SWEEP == bench-small ]] || SUFFIX=-$SWEEP
SKIP=$(awk '$1 == "warmup_steps:" {print $2; exit}' "configs/$SWEEP-soap.yaml")
OUT=${ASTERIA_BENCH_OUT:-bench/results/flat-steps$SUFFIX}
RAW=${ASTERIA_BENCH_RAW:-runs/bench/flat-steps$SUFFIX}
scripts/setup.sh >/dev/null
scripts/prepare_data.sh "$(grep -m1 -oE 'tok[0-9]+' "configs/$SWEEP-adamw.yaml" | cut -c4-)" >/dev/null
mkdir -p "$OUT" "$RAW"
run() {  # NAME CONFIG MODE
  if [[ -f $RAW/$1/metrics.jsonl ]] && [[ $(wc -l < "$RAW/$1/metrics.jsonl") -ge $STEPS ]]; then return; fi
  build/bin/asteria-train --config "configs/$SWEEP-$2.yaml" --set "run.dir=$RAW/$1" --set run.overwrite=true \
    --set "train.steps=$STEPS" --set train.eval_every=0 --set data.eval= --set "runtime.mode=$3" | tail -1
}
run adamw adamw native
runs=()
names=(adamw)
for opt in $OPTIMIZERS; do
  run "$opt-native" "$opt" native
  run "$opt-asteria" "$opt" asteria
  runs+=("$RAW/$opt-native" "$RAW/$opt-asteria")
  names+=("$opt-native" "$opt-asteria")
done
{
  echo "bench/flat_steps.sh $STEPS ($SWEEP): shipped configs, runtime.mode native or asteria, eval off; step times skip the first $SKIP steps (the lr warm-up)"
  isa=AVX2; grep -qw avx512f /proc/cpuinfo && isa=AVX-512
  echo "cpu: $(lscpu | awk -F': +' '/^Model name/ {print $2}') $isa, $(nproc) cores"
  echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset} cores=$(nproc) $(date -u +%F)"
  /usr/bin/python3 bench/summarize_runs.py --skip-steps "$SKIP" --baseline "$RAW/adamw" "${runs[@]}" --json "$OUT/summary.json"
  echo
  /usr/bin/python3 bench/flat_steps_summary.py "$RAW" "$SKIP" \
    "$(awk '$1 == "precondition_frequency:" {print $2; exit}' "configs/$SWEEP-soap.yaml")" "${names[@]}"
} | tee "$OUT/summary.txt"
