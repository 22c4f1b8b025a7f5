#!/usr/bin/env bash
# Step time of the shipped bench-small configs of several optimizers (default AdamW, SOAP, Muon),
# each as users run it (the second-order ones in asteria mode, their default), measured in
# ROUNDS interleaved rounds of STEPS steps on one machine: the mean and median step after the
# lr warm-up's first 10 steps, the optimizer's own share (optim_s), and each against AdamW's.
#   bench/optimizer_step_times.sh [STEPS] [ROUNDS] [OPTIMIZERS]   defaults: 60, 3, "adamw soap muon"
# Raw runs under runs/bench/optimizer-step-times/; bench/results/optimizer-step-times/summary.md.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-60}
ROUNDS=${2:-3}
OPTIMIZERS=${3:-adamw soap muon}
OUT=${ASTERIA_BENCH_OUT:-bench/results/optimizer-step-times}
RAW=${ASTERIA_BENCH_RAW:-runs/bench/optimizer-step-times}
scripts/setup.sh >/dev/null
scripts/prepare_data.sh 4096 >/dev/null
mkdir -p "$OUT" "$RAW"
for r in $(seq "$ROUNDS"); do
  for opt in $OPTIMIZERS; do
    build/bin/asteria-train --config "configs/bench-small-$opt.yaml" --set "run.dir=$RAW/$opt-$r" --set run.overwrite=true \
      --set "train.steps=$STEPS" --set data.eval= --set checkpoint.enabled=false >/dev/null 2>&1
  done
done
/usr/bin/python3 - "$RAW" "$ROUNDS" "$OPTIMIZERS" "$STEPS" > "$OUT/summary.md" <<'PY'
import json, statistics, subprocess, sys
raw, rounds, opts, steps = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), int(sys.argv[4])
cpu = subprocess.run("lscpu | sed -n 's/^Model name: *//p'", shell=True, capture_output=True, text=True).stdout.strip()
fam = subprocess.run("lscpu | sed -n 's/^CPU family: *//p;s/^Model: *//p' | tr '\\n' ' '", shell=True, capture_output=True, text=True).stdout.strip()
kern = subprocess.run(["/usr/bin/python3", "-c", "import ctypes; l=ctypes.CDLL('libopenblas.so.0'); l.openblas_get_corename.restype=ctypes.c_char_p; print(l.openblas_get_corename().decode())"], capture_output=True, text=True).stdout.strip()
git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
res = {}
for o in opts:
    means, medians, optim = [], [], []
    for r in range(1, rounds + 1):
        recs = [json.loads(l) for l in open(f"{raw}/{o}-{r}/metrics.jsonl")][10:]
        t = [x["step_time_s"] for x in recs]
        means.append(statistics.mean(t)); medians.append(statistics.median(t))
        optim.append(statistics.mean(x.get("optim_s", 0) for x in recs))
    res[o] = (statistics.median(means), statistics.median(medians), statistics.median(optim), means)
print(f"# bench-small step times of the shipped configs: bench/optimizer_step_times.sh {steps} {rounds}\n")
print(f"```\ncpu: {cpu} (family/model {fam}); BLAS kernels {kern}; git {git}\n```\n")
print("| optimizer | mean step s | median step s | optim_s | mean vs AdamW | rounds' means |")
print("|---|---|---|---|---|---|")
base = res.get("adamw", (None,))[0]
for o in opts:
    m, md, op, ms = res[o]
    rel = f"{m / base:.3f}" if base else "-"
    print(f"| {o} | {m:.4f} | {md:.4f} | {op:.4f} | {rel} | {' '.join(f'{x:.4f}' for x in ms)} |")
print(f"\nMedians over {rounds} interleaved rounds of each optimizer's mean (and median) step after step 10; "
      "SOAP in asteria mode (its default), AdamW and Muon have no refreshes.")
PY
cat "$OUT/summary.md"
