#!/usr/bin/env bash
# Sweep of PyTorch setups for bench/torch_bench_small.py on this machine, to pick its best setup
# (the one bench/throughput.sh compares asteria against). Two stages:
#   1. in-process variants (attention form, AdamW foreach, clip foreach), stepped interleaved in
#      one process so that load from other users hits them alike;
#   2. process setups (tcmalloc or not, OpenMP or pthread OpenBLAS, 2 or 1 threads) with the best
#      in-process variant, run in interleaved rounds; medians over rounds.
# Writes bench/results/torch-variants-<date>.json (one JSON line per run) and prints a summary.
# Usage: bench/torch_variants.sh [ROUNDS (default 2)] [STEPS (default 8)]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-2}
STEPS=${2:-8}
PY=/usr/bin/python3
TCMALLOC=/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4
LIB=/usr/lib/x86_64-linux-gnu
mkdir -p bench/results
OUT=bench/results/torch-variants-$(date +%Y%m%d-%H%M%S).json
: > "$OUT"
echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-(unset)}"
echo "stage 1: in-process variants (tcmalloc, OpenMP OpenBLAS, 2 threads), $ROUNDS rounds x $STEPS steps"
for r in $(seq "$ROUNDS"); do
  LD_PRELOAD=$TCMALLOC LD_LIBRARY_PATH=$LIB/openblas-openmp \
    $PY bench/torch_bench_small.py --threads 2 --steps "$STEPS" --warmup 2 --tag "stage1 round$r" \
    --variant maskfill-forloop-torch maskfill-foreach-foreach baddbmm-foreach-foreach \
              sdpa-foreach-foreach baddbmm-forloop-torch >> "$OUT"
done
BEST=$($PY - "$OUT" <<'EOF'
import json, sys, statistics, collections
# Score = tokens/s relative to the mean of its round (the variants of one round ran
# step-interleaved in one process, so load from other users cancels out of the ratio).
rounds = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    j = json.loads(line)
    rounds[j["tag"]][j["variant"]] = j["tokens_per_s"]
score = collections.defaultdict(list)
for vs in rounds.values():
    mean = sum(vs.values()) / len(vs)
    for v, t in vs.items():
        score[v].append(t / mean)
for v in sorted(score, key=lambda v: -statistics.median(score[v])):
    print(f"  {v:28s} relative score {statistics.median(score[v]):.3f}", file=sys.stderr)
print(max(score, key=lambda v: statistics.median(score[v])))
EOF
)
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
$PY - "$OUT" <<'EOF'
import json, sys, statistics, collections
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    j = json.loads(line)
    key = j["tag"].split(" ", 2)[0] + " " + j["variant"] + " " + " ".join(j["tag"].split(" ")[2:])
    runs[key].append(j)
print(f"{'setup':75s} {'tok/s med':>9s} {'(runs)':>24s} fwd_s  bwd_s  optim_s")
for k, v in runs.items():
    tps = [j["tokens_per_s"] for j in v]
    print(f"{k:75s} {statistics.median(tps):9.0f} {str([round(x) for x in tps]):>24s} "
          f"{statistics.median(j['fwd_s'] for j in v):.3f}  {statistics.median(j['bwd_s'] for j in v):.3f}  "
          f"{statistics.median(j['optim_s'] for j in v):.3f}")
EOF
echo "written: $OUT"
