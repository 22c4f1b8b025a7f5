#!/usr/bin/env bash
# Issue-3 benchmark: bench-small trained with AdamW, SOAP, Shampoo and KL-Shampoo in native mode
# (roots / bases computed synchronously), same data, seed, schedule and steps. Reports eval loss
# vs step and vs wall-clock, the step at which each reaches AdamW's final eval loss, and the
# step-time distribution (median, p99, max), with plots.
#   bench/optimizers.sh [STEPS]        (default 400; ~1-2 h on a 2-core machine)
# Raw runs (run.dir of each training: metrics.jsonl, config.yaml, run_info.json) go under
# runs/bench/<results folder name>/ (gitignored; ASTERIA_BENCH_RAW overrides); bench/results/ gets
# the summaries and plots only.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-400}
OUT=${ASTERIA_BENCH_OUT:-bench/results/optimizers-$(date +%Y%m%d-%H%M)}
RAW=${ASTERIA_BENCH_RAW:-runs/bench/$(basename "$OUT")}
scripts/setup.sh >/dev/null
scripts/prepare_data.sh 4096 >/dev/null
mkdir -p "$OUT" "$RAW"
runs=()
for opt in adamw soap shampoo kl-shampoo; do
  dir=$RAW/$opt
  build/bin/asteria-train --config configs/bench-small-$opt.yaml --set run.dir=$dir --set run.overwrite=true \
    --set train.steps=$STEPS --set train.eval_every=25 --set runtime.mode=native | tail -1
  runs+=("$dir")
done
/usr/bin/python3 bench/summarize_runs.py --baseline "${runs[0]}" "${runs[@]:1}" --json "$OUT/summary.json" | tee "$OUT/summary.txt"
/usr/bin/python3 scripts/plot_metrics.py "${runs[@]}" --out "$OUT/plots" --labels adamw,soap,shampoo,kl-shampoo
echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset}" >> "$OUT/summary.txt"
