#!/usr/bin/env bash
# Does computing the refreshes (roots, eigenbases) in float32 cost loss? bench-small trained with
# each OPTIMIZER at optim.refresh_dtype float64 and float32, native mode (refreshes synchronous,
# so only the precision differs), one thread each, the two precisions of a seed side by side;
# final eval loss of each pair and its relative difference, per seed.
#   bench/refresh_dtype_loss.sh [STEPS] [SEEDS] [OPTIMIZERS]   (defaults 400, "1 2", "soap kl-shampoo")
# Raw runs under runs/bench/refresh-dtype-loss/<optimizer>-seed<S>-<dtype>/ (gitignored; a finished
# run of STEPS steps there is kept, not retrained); the table in
# bench/results/refresh-dtype-loss/summary.md (ASTERIA_BENCH_OUT overrides the folder).
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-400}
SEEDS=${2:-1 2}
OPTIMIZERS=${3:-soap kl-shampoo}
OUT=${ASTERIA_BENCH_OUT:-bench/results/refresh-dtype-loss}
RAW=runs/bench/refresh-dtype-loss
cmake --build build -j2 --target asteria-train > /dev/null
scripts/prepare_data.sh 4096 > /dev/null
mkdir -p "$OUT" "$RAW"
train() {  # OPTIMIZER SEED DTYPE
  local dir=$RAW/$1-seed$2-$3
  [[ -f $dir/metrics.jsonl && $(wc -l < "$dir/metrics.jsonl") -eq $STEPS ]] && return 0
  build/bin/asteria-train --config "configs/bench-small-$1.yaml" --set "run.dir=$dir" --set run.overwrite=true \
    --set "train.steps=$STEPS" --set train.eval_every=25 --set runtime.mode=native --set runtime.threads=1 \
    --set "seed=$2" --set "optim.refresh_dtype=$3" > "$dir.log" 2>&1 || { echo "failed: $dir ($(tail -2 "$dir.log"))" >&2; return 1; }
}
for opt in $OPTIMIZERS; do
  for seed in $SEEDS; do
    train "$opt" "$seed" float64 & a=$!
    train "$opt" "$seed" float32 & b=$!
    wait $a && wait $b
  done
done
/usr/bin/python3 - "$RAW" "$STEPS" "$SEEDS" "$OPTIMIZERS" > "$OUT/summary.md" <<'PY'
import json, sys
raw, steps, seeds, optimizers = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split()
def final(opt, seed, dtype):
    evals = [json.loads(l) for l in open(f"{raw}/{opt}-seed{seed}-{dtype}/metrics.jsonl")]
    return [e["eval_loss"] for e in evals if "eval_loss" in e][-1]
print("# Refreshes in float64 vs float32: final eval loss\n")
print(f"`bench/refresh_dtype_loss.sh {steps} \"{' '.join(seeds)}\" \"{' '.join(optimizers)}\"`: bench-small, native mode, "
      f"{steps} steps, one thread a run.\n")
print("| optimizer | seed | float64 | float32 | float32 vs float64 |")
print("| --- | --- | --- | --- | --- |")
for opt in optimizers:
    for seed in seeds:
        a, b = final(opt, seed, "float64"), final(opt, seed, "float32")
        print(f"| {opt} | {seed} | {a:.4f} | {b:.4f} | {100 * (b - a) / a:+.3f} % |")
PY
cat "$OUT/summary.md"
