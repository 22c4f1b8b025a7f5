#!/usr/bin/env bash
# The demo: builds Asteria, prepares the English corpus and a 4096-token BPE tokenizer, trains
# bench-small with AdamW on CPU, and writes metrics.jsonl and PNG plots.
#   scripts/demo.sh [extra asteria-train --set overrides, e.g. train.steps=100]
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${ASTERIA_DEMO_STEPS:-300}
GEN=data/generated
RUN=runs/demo

scripts/setup.sh
BIN=${ASTERIA_BUILD_DIR:-build}/bin

scripts/build_corpus.sh "$GEN/corpus"
if [[ ! -s $GEN/tok4096/tokenizer.model || $GEN/corpus/corpus.jsonl -nt $GEN/tok4096/tokenizer.model ]]; then
  mkdir -p "$GEN/tok4096"
  "$BIN/asteria-data" train-tokenizer --corpus "$GEN/corpus/corpus.jsonl" --vocab-size 4096 \
    --output "$GEN/tok4096/tokenizer"
fi
if [[ ! -s $GEN/tok4096/train.bin || $GEN/tok4096/tokenizer.model -nt $GEN/tok4096/train.bin ]]; then
  "$BIN/asteria-data" encode --corpus "$GEN/corpus/corpus.jsonl" --tokenizer "$GEN/tok4096/tokenizer.model" \
    --output-dir "$GEN/tok4096"
fi
"$BIN/asteria-data" inspect "$GEN/tok4096/val.bin" --vocab-size 4096 --tokenizer "$GEN/tok4096/tokenizer.model" --show 24

sets=(--set run.dir=$RUN --set run.overwrite=true --set train.steps=$STEPS --set train.warmup_steps=30
      --set train.eval_every=50)
for s in "$@"; do sets+=(--set "$s"); done
"$BIN/asteria-train" --config configs/bench-small-adamw.yaml "${sets[@]}"

/usr/bin/python3 scripts/plot_metrics.py "$RUN" --out "$RUN/plots" --labels bench-small-adamw >/dev/null
echo
echo "demo: metrics   $RUN/metrics.jsonl"
echo "demo: config    $RUN/config.yaml"
echo "demo: plots     $RUN/plots/loss_vs_step.png $RUN/plots/loss_vs_time.png $RUN/plots/step_time.png"
