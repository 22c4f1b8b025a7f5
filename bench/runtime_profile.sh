#!/usr/bin/env bash
# Issue-4 benchmark: step-time profile of bench-small with SOAP, Shampoo and KL-Shampoo in native
# mode (synchronous roots, reference schedule) and asteria mode (shadow pipeline, staggered,
# delay 3, two host workers), against AdamW: median, p99 and max step time, mean relative to AdamW;
# and SOAP in native mode with stagger only. asteria-compute: the same pipeline with the root
# jobs in batches on the compute lane (runtime.shadow.lane compute) instead of host workers.
# Then the same at 8 micro-batches of gradient accumulation for AdamW and SOAP.
#   bench/runtime_profile.sh [STEPS] [ACCUM_STEPS]      (defaults 200 and 40)
# ASTERIA_BENCH_SETS="key=value ..." applies to every run (e.g. optim.refresh_dtype=float32).
# Raw runs (run.dir of each training: metrics.jsonl, config.yaml, run_info.json) go under
# runs/bench/<results folder name>/ (gitignored; ASTERIA_BENCH_RAW overrides); bench/results/ gets
# the summaries and plots only.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-200}
ACCUM_STEPS=${2:-40}
OUT=${ASTERIA_BENCH_OUT:-bench/results/runtime-profile-$(date +%Y%m%d-%H%M)}
RAW=${ASTERIA_BENCH_RAW:-runs/bench/$(basename "$OUT")}
scripts/setup.sh >/dev/null
scripts/prepare_data.sh 4096 >/dev/null
mkdir -p "$OUT" "$RAW"
common=(--set run.overwrite=true --set train.eval_every=0 --set data.eval= --set train.warmup_steps=10)
for s in ${ASTERIA_BENCH_SETS:-}; do common+=(--set "$s"); done
run() {  # NAME CONFIG STEPS [SETS...]
  local name=$1 cfg=$2 steps=$3
  shift 3
  local sets=()
  for s in "$@"; do sets+=(--set "$s"); done
  build/bin/asteria-train --config "configs/bench-small-$cfg.yaml" --set "run.dir=$RAW/$name" --set "train.steps=$steps" \
    "${common[@]}" "${sets[@]}" | tail -1
}
asteria=(runtime.mode=asteria runtime.stagger=true runtime.shadow.delay=3 runtime.shadow.lane=workers runtime.shadow.threads=2)
compute=(runtime.mode=asteria runtime.stagger=true runtime.shadow.delay=3 runtime.shadow.lane=compute)
run adamw adamw "$STEPS"
for opt in soap shampoo kl-shampoo; do
  run "$opt-native" "$opt" "$STEPS" runtime.mode=native
  run "$opt-asteria" "$opt" "$STEPS" "${asteria[@]}"
  run "$opt-asteria-compute" "$opt" "$STEPS" "${compute[@]}"
done
# Staggering alone (synchronous refreshes spread over the period): separates its effect on the
# spikes from the shadow pipeline's.
run soap-native-stagger soap "$STEPS" runtime.mode=native runtime.stagger=true
run adamw-accum8 adamw "$ACCUM_STEPS" train.grad_accum=8
run soap-native-accum8 soap "$ACCUM_STEPS" train.grad_accum=8 runtime.mode=native
run soap-asteria-accum8 soap "$ACCUM_STEPS" train.grad_accum=8 "${asteria[@]}"
run soap-asteria-compute-accum8 soap "$ACCUM_STEPS" train.grad_accum=8 "${compute[@]}"

py=/usr/bin/python3
{
  echo "== 1 micro-batch, $STEPS steps (step times skip the first 12 steps: warm-up and the initial eigendecompositions)"
  $py bench/summarize_runs.py --skip-steps 12 --baseline "$RAW/adamw" "$RAW"/{soap,shampoo,kl-shampoo}-{native,asteria,asteria-compute} "$RAW/soap-native-stagger" --json "$OUT/summary.json"
  echo "== 8 micro-batches, $ACCUM_STEPS steps"
  $py bench/summarize_runs.py --skip-steps 4 --baseline "$RAW/adamw-accum8" "$RAW"/soap-{native,asteria,asteria-compute}-accum8 --json "$OUT/summary-accum8.json"
  echo "sets: ${ASTERIA_BENCH_SETS:-none}  OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset}"
} | tee "$OUT/summary.txt"
$py scripts/plot_metrics.py "$RAW/adamw" "$RAW"/{soap,shampoo,kl-shampoo}-{native,asteria,asteria-compute} --out "$OUT/plots" \
  --labels adamw,soap-native,soap-asteria,soap-compute,shampoo-native,shampoo-asteria,shampoo-compute,kl-native,kl-asteria,kl-compute >/dev/null
