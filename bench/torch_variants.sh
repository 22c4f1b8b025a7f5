#!/usr/bin/env bash
# Sweep of PyTorch setups for bench/torch_bench_small.py on this machine, to pick its best setup
# (the one bench/throughput.sh compares asteria against). Two stages:
#   1. in-process variants (attention form, AdamW foreach, clip foreach), stepped interleaved in
#      one process so that load from other users hits them alike;
#   2. process setups (tcmalloc or not, OpenMP or pthread OpenBLAS, 2 or 1 threads) with the best
#      in-process variant, run in interleaved rounds; medians over rounds.
# Raw output: runs/bench-torch-variants-<date>/raw.jsonl (one JSON line per run, gitignored); the
# summary (bench/summarize_torch_variants.py) is printed and written to
# bench/results/torch-variants/summary-<date>.txt.
# Usage: bench/torch_variants.sh [ROUNDS (default 2)] [STEPS (default 8)]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-2}
STEPS=${2:-8}
PY=/usr/bin/python3
TCMALLOC=/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4
LIB=/usr/lib/x86_64-linux-gnu
STAMP=$(date +%Y%m%d-%H%M%S)
mkdir -p bench/results/torch-variants runs/bench-torch-variants-$STAMP
OUT=runs/bench-torch-variants-$STAMP/raw.jsonl
SUMMARY=bench/results/torch-variants/summary-$STAMP.txt
: > "$OUT"
echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-(unset)}"
echo "stage 1: in-process variants (tcmalloc, OpenMP OpenBLAS, 2 threads), $ROUNDS rounds x $STEPS steps"
for r in $(seq "$ROUNDS"); do
  LD_PRELOAD=$TCMALLOC LD_LIBRARY_PATH=$LIB/openblas-openmp \
    $PY bench/torch_bench_small.py --threads 2 --steps "$STEPS" --warmup 2 --tag "stage1 round$r" \
    --variant maskfill-forloop-torch maskfill-foreach-foreach baddbmm-foreach-foreach \
              sdpa-foreach-foreach baddbmm-forloop-torch >> "$OUT"
done
BEST=$($PY bench/summarize_torch_variants.py "$OUT" --best)
echo "best in-process variant: $BEST"
echo "stage 2: process setups, $ROUNDS rounds"
for r in $(seq "$ROUNDS"); do
  for setup in "tcmalloc openmp 2" "none openmp 2" "tcmalloc pthread 2" "none pthread 2" "tcmalloc openmp 1"; do
    set -- $setup
    pre=""; [ "$1" = tcmalloc ] && pre=$TCMALLOC
    LD_PRELOAD=$pre LD_LIBRARY_PATH=$LIB/openblas-$2 \
      $PY bench/torch_bench_small.py --threads "$3" --steps "$STEPS" --warmup 2 \
      --tag "stage2 round$r malloc=$1 blas=$2 threads=$3" --variant "$BEST" >> "$OUT"
  done
done
{
  $PY bench/summarize_torch_variants.py "$OUT"
  echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-(unset)}"
} | tee "$SUMMARY"
echo "written: $SUMMARY (raw: $OUT)"
