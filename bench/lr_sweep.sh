#!/usr/bin/env bash
# Convergence measured fairly: an lr sweep on bench-small for AdamW, SOAP, Shampoo and KL-Shampoo (and Muon, by OPTIMIZERS)
# (the second-order ones in asteria mode, as users run them), each at FACTORS x its shipped lr (a
# log grid), STEPS steps, eval every 25. Each optimizer's best lr (lowest final eval loss) is then
# compared with AdamW's best: steps and wall-clock to reach AdamW's best final eval loss, with a
# plot of eval loss vs wall-clock for the four best runs. The grid's edge is flagged when a best lr
# lies on it.
#   bench/lr_sweep.sh [STEPS] [FACTORS]        defaults: 400, "0.5 1 2 0.25"
#   OPTIMIZERS="soap kl-shampoo" bench/lr_sweep.sh 400 4   extend the grid for some (a best lr on its edge)
#   SWEEP=bench-batch bench/lr_sweep.sh 100                 the configs/bench-batch-*.yaml family instead (the
#     tiny model at an OLMo-1B-like 3.2 tokens per parameter a step); results in bench/results/lr-sweep-bench-batch/
#   MODE=native OPTIMIZERS="soap shampoo kl-shampoo" bench/lr_sweep.sh 400 1   the second-order ones in native mode
#     (synchronous refreshes) at their shipped lr, recorded beside the asteria runs as OPT-native-lrLR.json
#   SET="optim.kl_init_factor=0.1" OPTIMIZERS=kl-shampoo bench/lr_sweep.sh 100 1   other settings than the config's
#     (KEY=VALUE ..., each a --set), a variant of its own: OPT-kl_init_factor0.1-lrLR.json
# Evals every STEPS/16 steps (EVAL_EVERY overrides).
# 16 runs of 400 steps take 3-5 h on a 2-core machine (10-20 min each), often more than a session: every finished run
# leaves a small record (its eval curve, its CPU, its own step times) in bench/results/lr-sweep/runs/,
# which is committed, and running the script again skips the runs that have one. The order is
# factor by factor, so all four optimizers have points early.
# Loss per step does not depend on timing (asteria mode publishes each refresh at its fixed step),
# so a run may share the CPU; wall-clock is therefore also given as steps x the per-step time of
# bench/flat_steps.sh (all optimizers measured in one uncontended run), next to each run's own clock.
# Raw runs go under runs/bench/lr-sweep/ (gitignored).
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-400}
FACTORS=${2:-0.5 1 2 0.25}
OPTIMIZERS=${OPTIMIZERS:-adamw soap shampoo kl-shampoo}
SWEEP=${SWEEP:-bench-small}
SUFFIX=""; [[ $SWEEP == bench-small ]] || SUFFIX=-$SWEEP
EVAL_EVERY=${EVAL_EVERY:-$((STEPS / 16))}
OUT=${ASTERIA_BENCH_OUT:-bench/results/lr-sweep$SUFFIX}
RAW=${ASTERIA_BENCH_RAW:-runs/bench/lr-sweep$SUFFIX}
scripts/setup.sh >/dev/null
scripts/prepare_data.sh "$(grep -m1 -oE 'tok[0-9]+' "configs/$SWEEP-adamw.yaml" | cut -c4-)" >/dev/null
mkdir -p "$OUT/runs" "$RAW"
for f in $FACTORS; do
  for opt in $OPTIMIZERS; do
    cfg=configs/$SWEEP-$opt.yaml
    base=$(awk '$1 == "lr:" {print $2; exit}' "$cfg")
    mode=asteria
    [[ $opt == adamw || $opt == muon ]] && mode=native   # no refreshes to move off the critical path
    tag=$opt
    if [[ -n ${MODE:-} && $MODE != "$mode" ]]; then mode=$MODE; tag=$opt-$MODE; fi
    sets=()
    for kv in ${SET:-}; do sets+=(--set "$kv"); tag=$tag-${kv#*.}; done
    tag=${tag//=/}
    lr=$(python3 -c "print(f'{$base * $f:.3g}')")
    record=$OUT/runs/$tag-lr$lr.json
    [[ -f $record ]] && continue
    dir=$RAW/$tag-lr$lr
    build/bin/asteria-train --config "$cfg" --set "run.dir=$dir" --set run.overwrite=true \
      --set "train.steps=$STEPS" --set "train.eval_every=$EVAL_EVERY" --set "optim.lr=$lr" --set "runtime.mode=$mode" "${sets[@]}" | tail -1
    # Which machine ran it: the sweep spans sessions, and a run's own clock compares only on one CPU.
    # (The model name alone is often just "Intel(R) Xeon(R) Processor": the vector width is named too.)
    isa=AVX2; grep -qw avx512f /proc/cpuinfo && isa=AVX-512
    /usr/bin/python3 bench/lr_sweep_record.py "$dir/metrics.jsonl" "$record" "$opt" "$lr" "$mode" "$STEPS" \
      "$(lscpu | awk -F': +' '/^Model name/ {print $2}') $isa, $(nproc) cores" "$(git rev-parse --short HEAD)" "${SET:-}"
  done
done
/usr/bin/python3 bench/lr_sweep_summary.py "$OUT" "$STEPS" "bench/results/flat-steps$SUFFIX/summary.json" "$SWEEP"
