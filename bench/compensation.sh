#!/usr/bin/env bash
# What optim.compensated_updates (default true) costs: bench-small AdamW and SOAP (native), steps
# with the compensation on and off, in interleaved rounds (a drift of the shared machine hits
# both alike). Prints each run's median step time and optimizer time, and the ratio on / off.
#   bench/compensation.sh [ROUNDS (2)] [STEPS (25)]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-2}
STEPS=${2:-25}
PY=/usr/bin/python3
cmake --build build -j2 --target asteria-train >/dev/null
TOKENS=data/generated/bench/random-v4096-4M.u16
mkdir -p "$(dirname "$TOKENS")"
[[ -f $TOKENS ]] || $PY -c "import numpy as np; np.random.default_rng(0).integers(0, 4096, size=4_000_000, dtype=np.uint16).tofile('$TOKENS')"
echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset} cores=$(nproc)"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
for r in $(seq 1 "$ROUNDS"); do
  for opt in adamw soap; do
    order=(true false)
    ((r % 2 == 0)) && order=(false true)
    for comp in "${order[@]}"; do
      build/bin/asteria-train --config configs/bench-small-$opt.yaml --set train.steps="$STEPS" \
        --set data.train=$TOKENS --set data.eval=$TOKENS --set train.eval_every=0 \
        --set optim.compensated_updates=$comp --set checkpoint.enabled=false --set runtime.mode=native \
        --set run.dir="$OUT/$opt-$comp-$r" >/dev/null 2>&1
    done
  done
done
$PY - "$OUT" "$ROUNDS" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def med(opt, comp, key):
    vals = []
    for r in range(1, rounds + 1):
        rows = [json.loads(l) for l in open(f"{out}/{opt}-{comp}-{r}/metrics.jsonl")][5:]
        vals += [row[key] for row in rows]
    return statistics.median(vals)
for opt in ("adamw", "soap"):
    on, off = med(opt, "true", "step_time_s"), med(opt, "false", "step_time_s")
    oon, ooff = med(opt, "true", "optim_s"), med(opt, "false", "optim_s")
    print(f"{opt:6s} step {on*1e3:7.1f} ms on / {off*1e3:7.1f} ms off = {on/off:.3f}x;"
          f"  optimizer {oon*1e3:6.1f} / {ooff*1e3:6.1f} ms = {oon/ooff:.3f}x")
PY
