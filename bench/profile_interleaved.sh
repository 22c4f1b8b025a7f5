#!/usr/bin/env bash
# Issue-4 benchmark: step-time profile of bench-small, every config run in ROUNDS interleaved
# rounds of STEPS steps, so that a drift of this shared machine's speed hits every config alike.
# Configs: AdamW, and for each optimizer (soap, shampoo, kl-shampoo) native mode and asteria
# mode (stagger, delay 3) with the root jobs on 2 host workers ("workers") or in parts on the
# compute lane ("compute", runtime.shadow.lane compute).
#   bench/profile_interleaved.sh [STEPS] [ROUNDS] [ACCUM]     (defaults 60, 3, 1)
# ACCUM: micro-batches of gradient accumulation per step.
# ASTERIA_BENCH_OPTS="soap ..." picks the optimizers; ASTERIA_BENCH_SETS="key=value ..." applies
# to every run (e.g. optim.refresh_dtype=float32).
# The summary (bench/summarize_interleaved.py) pools the rounds' step times after the first
# steps of each run (warm-up, initial eigenbases) and reports, besides median / mean / p99 / max,
# the steady max/median (each step's median over the rounds) and the periodic one (each
# position in the refresh period of 10 steps, over all periods and rounds), so that a stall of
# the machine in one round does not count while a spike the schedule puts at a step does.
# Raw runs (run.dir of each training: metrics.jsonl, config.yaml, run_info.json) go under
# runs/bench/<results folder name>/ (gitignored; ASTERIA_BENCH_RAW overrides); bench/results/ gets
# the summaries and plots only.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-60}
ROUNDS=${2:-3}
ACCUM=${3:-1}
OPTS=${ASTERIA_BENCH_OPTS:-soap shampoo kl-shampoo}
OUT=${ASTERIA_BENCH_OUT:-bench/results/profile-interleaved-$(date +%Y%m%d-%H%M)}
RAW=${ASTERIA_BENCH_RAW:-runs/bench/$(basename "$OUT")}
SKIP=$((ACCUM > 1 ? 4 : 12))
scripts/setup.sh >/dev/null
scripts/prepare_data.sh 4096 >/dev/null
mkdir -p "$OUT" "$RAW"
common=(--set run.overwrite=true --set train.eval_every=0 --set data.eval= --set "train.warmup_steps=$((SKIP - 2))"
        --set "train.grad_accum=$ACCUM" --set "train.steps=$STEPS")
for s in ${ASTERIA_BENCH_SETS:-}; do common+=(--set "$s"); done
asteria=(runtime.mode=asteria runtime.stagger=true runtime.shadow.delay=3)
run() {  # NAME CONFIG [SETS...]
  local name=$1 cfg=$2
  shift 2
  local sets=()
  for s in "$@"; do sets+=(--set "$s"); done
  build/bin/asteria-train --config "configs/bench-small-$cfg.yaml" --set "run.dir=$RAW/$name" "${common[@]}" \
    "${sets[@]}" | tail -1
}
names=(adamw)
for opt in $OPTS; do names+=("$opt-native" "$opt-workers" "$opt-compute"); done
for r in $(seq 1 "$ROUNDS"); do
  run "adamw-r$r" adamw
  for opt in $OPTS; do
    run "$opt-native-r$r" "$opt" runtime.mode=native
    run "$opt-workers-r$r" "$opt" "${asteria[@]}" runtime.shadow.lane=workers runtime.shadow.threads=2
    run "$opt-compute-r$r" "$opt" "${asteria[@]}" runtime.shadow.lane=compute
  done
done
/usr/bin/python3 bench/summarize_interleaved.py "$RAW" "$ROUNDS" "$SKIP" 10 "${names[@]}" --out "$OUT" | tee "$OUT/summary.txt"
echo "steps=$STEPS rounds=$ROUNDS accum=$ACCUM skip=$SKIP sets: ${ASTERIA_BENCH_SETS:-none} OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset}" | tee -a "$OUT/summary.txt"
