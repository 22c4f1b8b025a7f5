#!/usr/bin/env bash
# Builds the English corpus and, for each vocabulary size given, a BPE tokenizer and the
# train/val token files under data/generated/tok<V>/ (skipped when up to date).
#   scripts/prepare_data.sh [VOCAB ...]      default: 4096
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${ASTERIA_BUILD_DIR:-build}/bin
GEN=data/generated
scripts/build_corpus.sh "$GEN/corpus"
for V in "${@:-4096}"; do
  D=$GEN/tok$V
  mkdir -p "$D"
  if [[ ! -s $D/tokenizer.model || $GEN/corpus/corpus.jsonl -nt $D/tokenizer.model ]]; then
    "$BIN/asteria-data" train-tokenizer --corpus "$GEN/corpus/corpus.jsonl" --vocab-size "$V" --output "$D/tokenizer"
  fi
  if [[ ! -s $D/train.bin || $D/tokenizer.model -nt $D/train.bin ]]; then
    "$BIN/asteria-data" encode --corpus "$GEN/corpus/corpus.jsonl" --tokenizer "$D/tokenizer.model" --output-dir "$D"
  fi
done
