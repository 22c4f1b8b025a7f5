#!/usr/bin/env bash
# Issue-4 benchmark: does bounded staleness cost loss? bench-small SOAP trained in native mode
# (bases refreshed synchronously, the authors' schedule) and in asteria mode (shadow pipeline,
# staggered) with publish delays D = 1, 2 and 4, and native staggered; same data, seed and schedule. Reports the final
# eval loss of each and its difference from native, with plots.
#   bench/shadow_loss.sh [STEPS] [THREADS] [SEED]      (defaults 400, 0 = all cores, 0)
# Another seed (initialization and data order) shows how much of a difference is run-to-run.
# ASTERIA_BENCH_RUNS="native asteria-d2" trains only those runs (the summary covers the runs
# present in the raw folder). ASTERIA_BENCH_SETS="key=value ..." applies to every run.
# The asteria runs publish synchronously during the lr warm-up (runtime.shadow.sync_steps
# defaults to train.warmup_steps); asteria-d4-nosync shows D = 4 without it.
# Raw runs (run.dir of each training: metrics.jsonl, config.yaml, run_info.json) go under
# runs/bench/<results folder name>/ (gitignored; ASTERIA_BENCH_RAW overrides); bench/results/ gets
# the summaries and plots only.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-400}
THREADS=${2:-0}
SEED=${3:-0}
OUT=${ASTERIA_BENCH_OUT:-bench/results/shadow-loss-$(date +%Y%m%d-%H%M)}
RAW=${ASTERIA_BENCH_RAW:-runs/bench/$(basename "$OUT")}
scripts/setup.sh >/dev/null
scripts/prepare_data.sh 4096 >/dev/null
mkdir -p "$OUT" "$RAW"
RUNS=${ASTERIA_BENCH_RUNS:-native native-stagger asteria-d1 asteria-d2 asteria-d4}
run() {  # NAME [SETS...]; with ASTERIA_BENCH_REUSE=1 a finished run of STEPS steps is kept
  local name=$1
  shift
  [[ " $RUNS " == *" $name "* ]] || return 0
  if [[ ${ASTERIA_BENCH_REUSE:-0} == 1 && -f $RAW/$name/metrics.jsonl &&
        $(wc -l < "$RAW/$name/metrics.jsonl") -eq $STEPS ]]; then
    echo "reusing $RAW/$name"
    return
  fi
  local sets=()
  for s in ${ASTERIA_BENCH_SETS:-} "$@"; do sets+=(--set "$s"); done
  build/bin/asteria-train --config configs/bench-small-soap.yaml --set "run.dir=$RAW/$name" --set "train.steps=$STEPS" \
    --set run.overwrite=true --set train.eval_every=25 --set "runtime.threads=$THREADS" --set "seed=$SEED" \
    "${sets[@]}" | tail -1
}
run native runtime.mode=native
# Staggering alone (synchronous refreshes, spread over the F steps): separates its effect from
# the delay's.
run native-stagger runtime.mode=native runtime.stagger=true
for d in 1 2 4; do
  run "asteria-d$d" runtime.mode=asteria runtime.stagger=true "runtime.shadow.delay=$d" runtime.shadow.lane=workers runtime.shadow.threads=2
done
run asteria-d4-nosync runtime.mode=asteria runtime.stagger=true runtime.shadow.delay=4 runtime.shadow.lane=workers runtime.shadow.threads=2 \
  runtime.shadow.sync_steps=0
py=/usr/bin/python3
present=()
for r in native-stagger asteria-d1 asteria-d2 asteria-d4 asteria-d4-nosync; do [[ -f $RAW/$r/metrics.jsonl ]] && present+=("$RAW/$r"); done
{
  $py bench/summarize_runs.py --baseline "$RAW/native" "${present[@]}" --json "$OUT/summary.json"
  $py - "$RAW" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
def final_eval(run):
    last = None
    for line in open(out / run / "metrics.jsonl"):
        rec = json.loads(line)
        if "eval_loss" in rec:
            last = rec["eval_loss"]
    return last
base = final_eval("native")
print(f"native final eval loss {base:.4f}")
for run in ["native-stagger"] + [f"asteria-d{d}" for d in (1, 2, 4)] + ["asteria-d4-nosync"]:
    if not (out / run / "metrics.jsonl").exists():
        continue
    v = final_eval(run)
    print(f"{run}: final eval loss {v:.4f}, relative difference {100 * (v - base) / base:+.3f} % (target: within 0.5 %)")
PY
  echo "seed=$SEED threads=$THREADS sets: ${ASTERIA_BENCH_SETS:-none} OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset}"
} | tee "$OUT/summary.txt"
labels=native
for r in "${present[@]}"; do labels+=",${r##*/}"; done
$py scripts/plot_metrics.py "$RAW"/native "${present[@]}" --out "$OUT/plots" --labels "$labels" >/dev/null
