#!/usr/bin/env bash
# OLMo-1B SOAP on this machine with the shadow pipeline on, its refreshes in flight placed through
# the tiers (runtime.placement auto parks them on the disk tier: runtime.shadow.resident_jobs),
# against the synchronous-refresh recipe, one after the other in the same invocation:
#   sync      configs/olmo-1b-soap.yaml as shipped: refreshes opened in the first
#             runtime.shadow.sync_steps (-1 = train.warmup_steps, 2000) steps publish at once
#   in-flight the same with runtime.shadow.sync_steps=1: from step 2 on each refresh is computed
#             on the compute lane in parts over runtime.shadow.delay (3) steps and published then
# Both through bench/olmo_1b_24g.sh (one 2048-token instance per step, train.micro_batch=1
# train.grad_accum=1, so that a step takes minutes here; checkpoints and eval off).
# Reports mean, median, p95 and max step time over steps 2..STEPS (step 1 holds every block's
# first eigendecomposition in both), the root jobs' and the job store's figures, peak RSS, losses.
#   bench/olmo_1b_shadow.sh [STEPS]     default 6
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-6}
OUT=bench/results/olmo-1b-shadow
RAW=runs/bench/olmo-1b-shadow
mkdir -p "$OUT" "$RAW"
ASTERIA_BENCH_OUT=$RAW/sync ASTERIA_BENCH_RAW=$RAW/sync bench/olmo_1b_24g.sh "$STEPS" soap
ASTERIA_BENCH_OUT=$RAW/in-flight ASTERIA_BENCH_RAW=$RAW/in-flight bench/olmo_1b_24g.sh "$STEPS" soap \
  --set runtime.shadow.sync_steps=1
/usr/bin/python3 bench/olmo_1b_shadow_summary.py "$RAW" "$STEPS" | tee "$OUT/summary.md"
