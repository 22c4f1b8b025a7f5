#!/usr/bin/env bash
# Issue-4 benchmark, 8 micro-batches of gradient accumulation: AdamW, SOAP native, SOAP asteria
# (host workers) and SOAP asteria (compute lane), run in ROUNDS interleaved rounds of STEPS steps
# each, so that a drift of this shared machine's speed hits every config alike; the step times of
# all rounds of a config are pooled (the first 4 steps of each run skipped) and compared with
# AdamW's.
#   bench/accum_interleaved.sh [STEPS] [ROUNDS]        (defaults 20 and 2)
# ASTERIA_BENCH_SETS="key=value ..." applies to every run (e.g. optim.refresh_dtype=float32).
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-20}
ROUNDS=${2:-2}
OUT=${ASTERIA_BENCH_OUT:-bench/results/accum-interleaved-$(date +%Y%m%d-%H%M)}
scripts/setup.sh >/dev/null
scripts/prepare_data.sh 4096 >/dev/null
mkdir -p "$OUT"
common=(--set run.overwrite=true --set train.eval_every=0 --set data.eval= --set train.warmup_steps=4
        --set train.grad_accum=8 --set "train.steps=$STEPS")
for s in ${ASTERIA_BENCH_SETS:-}; do common+=(--set "$s"); done
asteria=(runtime.mode=asteria runtime.stagger=true runtime.shadow.delay=3)
run() {  # NAME CONFIG [SETS...]
  local name=$1 cfg=$2
  shift 2
  local sets=()
  for s in "$@"; do sets+=(--set "$s"); done
  build/bin/asteria-train --config "configs/bench-small-$cfg.yaml" --set "run.dir=$OUT/$name" "${common[@]}" \
    "${sets[@]}" | tail -1
}
for r in $(seq 1 "$ROUNDS"); do
  run "adamw-r$r" adamw
  run "soap-native-r$r" soap runtime.mode=native
  run "soap-asteria-r$r" soap "${asteria[@]}" runtime.shadow.threads=2
  run "soap-asteria-compute-r$r" soap "${asteria[@]}" runtime.shadow.lane=compute
done
/usr/bin/python3 - "$OUT" "$ROUNDS" <<'PY' | tee "$OUT/summary.txt"
import json, pathlib, statistics, sys
out, rounds = pathlib.Path(sys.argv[1]), int(sys.argv[2])
def times(name, r):
    rows = [json.loads(l) for l in open(out / f"{name}-r{r}" / "metrics.jsonl")]
    return [x["step_time_s"] for x in rows if x["step"] > 4]
names = ["adamw", "soap-native", "soap-asteria", "soap-asteria-compute"]
pooled = {n: [t for r in range(1, rounds + 1) for t in times(n, r)] for n in names}
base = statistics.fmean(pooled["adamw"])
print(f"{'run':22s} {'steps':>5s} {'median s':>9s} {'mean s':>8s} {'max s':>8s} {'max/med':>8s} {'mean/adamw':>10s}  per round mean/adamw")
for n in names:
    t = pooled[n]
    per_round = " ".join(f"{statistics.fmean(times(n, r)) / statistics.fmean(times('adamw', r)):.3f}" for r in range(1, rounds + 1))
    print(f"{n:22s} {len(t):5d} {statistics.median(t):9.3f} {statistics.fmean(t):8.3f} {max(t):8.3f} "
          f"{max(t) / statistics.median(t):8.2f} {statistics.fmean(t) / base:10.3f}  {per_round}")
PY
echo "steps=$STEPS rounds=$ROUNDS sets: ${ASTERIA_BENCH_SETS:-none} OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset}" | tee -a "$OUT/summary.txt"
