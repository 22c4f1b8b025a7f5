#!/usr/bin/env bash
# The demo: builds Asteria, prepares the English corpus and a 4096-token BPE tokenizer, trains
# bench-small with AdamW on CPU, writes metrics.jsonl and PNG plots, and prints a text sample of
# the trained model (asteria-generate from its last checkpoint).
#   scripts/demo.sh [extra asteria-train --set overrides, e.g. train.steps=100]
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${ASTERIA_DEMO_STEPS:-300}
GEN=data/generated
RUN=runs/demo

scripts/setup.sh
BIN=${ASTERIA_BUILD_DIR:-build}/bin

scripts/prepare_data.sh 4096
"$BIN/asteria-data" inspect "$GEN/tok4096/val.bin" --vocab-size 4096 --tokenizer "$GEN/tok4096/tokenizer.model" --show 24

sets=(--set run.dir=$RUN --set run.overwrite=true --set train.steps=$STEPS --set train.warmup_steps=30
      --set train.eval_every=50)
for s in "$@"; do sets+=(--set "$s"); done
"$BIN/asteria-train" --config configs/bench-small-adamw.yaml "${sets[@]}"

/usr/bin/python3 scripts/plot_metrics.py "$RUN" --out "$RUN/plots" --labels bench-small-adamw >/dev/null
last=$(ls -d "$RUN"/checkpoints/step* | tail -1)
echo
echo "demo: a sample of the trained model (asteria-generate --checkpoint $last, sampled with a seed):"
"$BIN/asteria-generate" --checkpoint "$last" --prompt "And God said" --max-new-tokens 48 --temperature 0.8 \
  --top-k 40 --seed 1
echo
echo "demo: metrics   $RUN/metrics.jsonl"
echo "demo: config    $RUN/config.yaml"
echo "demo: plots     $RUN/plots/loss_vs_step.png $RUN/plots/loss_vs_time.png $RUN/plots/step_time.png"
