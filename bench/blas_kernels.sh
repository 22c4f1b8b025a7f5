#!/usr/bin/env bash
# What runtime.blas auto buys on this CPU (core/cpu/blas_kernels.hpp), and where a bench-small
# step stands against the GEMM rate at the model's shapes:
#   - bench-small AdamW, runtime.blas as-is vs auto (the shipped default), ROUNDS interleaved
#     rounds of STEPS steps: tokens/s, achieved FLOP/s (run_info.json's FLOPs per token), and the
#     kernels each ran; where the library already chose the CPU's best set the two are the same
#     kernels, and the summary says so;
#   - bench_sgemm on the kernels auto runs: the FLOP-weighted sgemm rate at the step's shapes, and
#     the step's achieved FLOP/s against it;
#   - bench-small SOAP, Shampoo and KL-Shampoo in asteria mode against AdamW: mean step after the
#     warm-up, optim_s, the refreshes' time on the compute lane, and each optimizer's per-step
#     matrix products (run_info.json's optimizer_step_matmul_flops) over optim_s against the same
#     GEMM rate.
# Writes bench/results/blas-kernels/<cpu>/summary.md (one folder per CPU kind; ASTERIA_BENCH_OUT
# names another, e.g. for a run under a set OPENBLAS_CORETYPE).
#   bench/blas_kernels.sh [STEPS] [ROUNDS]     (defaults 40 and 2)
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-40}
ROUNDS=${2:-2}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cmake --build build -j2 --target asteria-train bench_sgemm > /dev/null
source bench/common.sh
TOKENS=$(bench_tokens)
WORK=$(mktemp -d /tmp/asteria-blas-kernels.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
CPU=$(cpu_kind)
OUT=${ASTERIA_BENCH_OUT:-bench/results/blas-kernels/$CPU}
run() {  # NAME CONFIG STEPS SETS...
  local name=$1 config=$2 steps=$3
  shift 3
  build/bin/asteria-train --config "configs/$config" --set "data.train=$TOKENS" --set data.eval= --set "train.steps=$steps" \
    --set checkpoint.enabled=false --set "run.dir=$WORK/$name" --set run.overwrite=true "$@" > "$WORK/$name.log" 2>&1
}
for r in $(seq "$ROUNDS"); do
  # (order reversed every other round: drift falls on both)
  if ((r % 2)); then order="as-is auto"; else order="auto as-is"; fi
  for b in $order; do run "adamw-$b-$r" bench-small-adamw.yaml "$STEPS" --set train.warmup_steps=0 --set "runtime.blas=$b"; done
done
build/bin/bench_sgemm --min-time 0.5 --repeats 5 > "$WORK/sgemm.json" 2> /dev/null
run adamw-long bench-small-adamw.yaml 70 --set runtime.mode=asteria
for o in soap shampoo kl-shampoo; do run "$o-long" "bench-small-$o.yaml" 70 --set runtime.mode=asteria; done
mkdir -p "$OUT"
/usr/bin/python3 - "$WORK" "$STEPS" "$ROUNDS" > "$OUT/summary.md" <<'PY'
import json, statistics, sys
work, steps, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def lines(name): return [json.loads(l) for l in open(f"{work}/{name}/metrics.jsonl")]
def info(name): return json.load(open(f"{work}/{name}/run_info.json"))
sg = json.load(open(f"{work}/sgemm.json"))
blas = sg["blas"]
print("# BLAS kernels on this CPU\n")
print(f"`bench/blas_kernels.sh {steps} {rounds}`: {blas['cpu']} ({blas['cpu_vendor']} family/model {blas['cpu_family_model']}: "
      f"{blas['cpu_features']}), OpenBLAS: {blas['openblas_config']}; best set for this CPU: {blas['cpu_best_kernels'] or 'none known'}.\n")
print("| bench-small AdamW | kernels | tokens/s (median over rounds) | achieved GFLOP/s |")
print("| --- | --- | --- | --- |")
tps = {}
for b in ["as-is", "auto"]:
    per_round = [statistics.median([l["tokens_per_s"] for l in lines(f"adamw-{b}-{r}")[3:]]) for r in range(1, rounds + 1)]
    i = info(f"adamw-{b}-1")
    tps[b] = statistics.median(per_round)
    print(f"| runtime.blas {b} | {i['blas']['openblas_corename']} | {tps[b]:.0f} | {tps[b] * i['flops_per_token'] / 1e9:.1f} |")
same = info("adamw-as-is-1")["blas"]["openblas_corename"] == info("adamw-auto-1")["blas"]["openblas_corename"]
why = ""
if same:
    env = blas.get("openblas_coretype_env", "(unset)")
    why = (f" (the same kernels: OPENBLAS_CORETYPE={env} is set by the environment, and a set value is never overridden)"
           if env != "(unset)" else " (the same kernels: the library chose this CPU's best set already)")
print(f"\nauto / as-is: {tps['auto'] / tps['as-is']:.2f}" + why)
flops = info("adamw-auto-1")["flops_per_token"]
print(f"\nsgemm at the step's shapes (FLOP-weighted, {sg['openblas_corename']}): {sg['weighted_gflops']:.1f} GFLOP/s; "
      f"the step's achieved rate / that: {tps['auto'] * flops / 1e9 / sg['weighted_gflops']:.2f} (target >= 0.85)\n")
def steady(name, key): return [l.get(key, 0.0) for l in lines(name)][45:]
a = statistics.mean(steady("adamw-long", "step_time_s"))
print("| bench-small, asteria mode, steps 46..70 | mean step (s) | / AdamW | optim_s | root_jobs_s (refreshes on the compute lane) | per-step matrix products (GFLOP) | their rate over optim_s (GFLOP/s) | / sgemm rate |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
print(f"| AdamW | {a:.3f} | 1.00 | {statistics.mean(steady('adamw-long', 'optim_s')):.3f} | - | - | - | - |")
ratios = {}
for name, label in [("soap", "SOAP"), ("shampoo", "Shampoo"), ("kl-shampoo", "KL-Shampoo")]:
    run = f"{name}-long"
    s, so, sr = (statistics.mean(steady(run, k)) for k in ["step_time_s", "optim_s", "root_jobs_s"])
    gflop = info(run)["optimizer_step_matmul_flops"] / 1e9
    ratios[label] = s / a
    print(f"| {label} | {s:.3f} | {s / a:.2f} | {so:.3f} | {sr:.3f} | {gflop:.1f} | {gflop / so:.0f} | {gflop / so / sg['weighted_gflops']:.2f} |")
print(f"\nSOAP / AdamW mean step: {ratios['SOAP']:.2f} (target <= 1.5). optim_s also holds the elementwise work "
      "(the Adam update in the rotated basis, grafting, AdamW on the embedding and head), so the last column is a lower bound "
      "on the products' own rate.")
PY
cat "$OUT/summary.md"
