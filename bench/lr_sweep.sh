#!/usr/bin/env bash
# Convergence measured fairly: an lr sweep on bench-small for AdamW, SOAP, Shampoo and KL-Shampoo
# (the second-order ones in asteria mode, as users run them), each at FACTORS x its shipped lr (a
# log grid), STEPS steps, eval every 25. Each optimizer's best lr (lowest final eval loss) is then
# compared with AdamW's best: steps and wall-clock to reach AdamW's best final eval loss, with a
# plot of eval loss vs wall-clock for the four best runs. The grid's edge is flagged when a best lr
# lies on it.
#   bench/lr_sweep.sh [STEPS] [FACTORS]        defaults: 400, "0.25 0.5 1 2"
# 16 runs of 400 steps take ~5 h on a 2-core machine; finished runs (a complete metrics.jsonl) are
# kept, so running it again continues where it stopped. Each run notes its CPU (machine.txt); the
# summary says when the best runs ran on different CPUs, where their wall-clocks do not compare.
# Raw runs go under runs/bench/lr-sweep/ (gitignored); bench/results/lr-sweep/ gets the summary.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-400}
FACTORS=${2:-0.25 0.5 1 2}
OUT=${ASTERIA_BENCH_OUT:-bench/results/lr-sweep}
RAW=${ASTERIA_BENCH_RAW:-runs/bench/lr-sweep}
scripts/setup.sh >/dev/null
scripts/prepare_data.sh 4096 >/dev/null
mkdir -p "$OUT" "$RAW"
echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset} cores=$(nproc)" > "$RAW/env.txt"
for opt in adamw soap shampoo kl-shampoo; do
  cfg=configs/bench-small-$opt.yaml
  base=$(awk '$1 == "lr:" {print $2; exit}' "$cfg")
  mode=asteria
  [[ $opt == adamw ]] && mode=native
  for f in $FACTORS; do
    lr=$(python3 -c "print(f'{$base * $f:.3g}')")
    dir=$RAW/$opt-lr$lr
    if [[ -f $dir/metrics.jsonl ]] && [[ $(wc -l < "$dir/metrics.jsonl") -ge $STEPS ]]; then continue; fi
    build/bin/asteria-train --config "$cfg" --set "run.dir=$dir" --set run.overwrite=true \
      --set "train.steps=$STEPS" --set train.eval_every=25 --set "optim.lr=$lr" --set "runtime.mode=$mode" | tail -1
    # Which machine ran it: the sweep may span sessions, and wall-clock compares only on one CPU.
    # (The model name alone is often just "Intel(R) Xeon(R) Processor": the vector width is named too.)
    isa=AVX2; grep -qw avx512f /proc/cpuinfo && isa=AVX-512
    echo "$(lscpu | awk -F': +' '/^Model name/ {print $2}') $isa | cores $(nproc) | $(date -u +%FT%TZ)" > "$dir/machine.txt"
  done
done
/usr/bin/python3 bench/lr_sweep_summary.py "$RAW" "$OUT" "$STEPS"
