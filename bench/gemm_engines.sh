#!/usr/bin/env bash
# What runtime.gemm (core/cpu/gemm_routing.hpp) buys on this CPU, against the CPU's measured peak
# and against PyTorch at its best, all in one run (a shared machine drifts: every ratio below is
# against a baseline from the same run):
#   1. bench_fma_peak: the fp32 FMA peak of the cores (AVX2 and AVX-512 code);
#   2. bench_sgemm at bench-small's GEMM shapes, FLOP-weighted: OpenBLAS (the kernels the system
#      gives it), oneDNN, auto (the default) and oneDNN bf16; then the same on an AVX2 CPU's
#      kernels (oneDNN held to AVX2 by DNNL_MAX_CPU_ISA, OpenBLAS to its Zen set: Zen 3's case);
#   3. bench-small AdamW and SOAP (asteria mode) training, ROUNDS interleaved rounds of STEPS
#      steps: runtime.gemm openblas (the previous default) vs auto (fp32) vs auto with
#      runtime.precision bf16; tokens/s (median of the steps after the first 5), achieved FLOP/s
#      (run_info.json's FLOPs per token) and its fraction of the measured peak; and AdamW with
#      OpenBLAS held to its Haswell kernels, as the system holds it on Zen 5 (OPENBLAS_CORETYPE,
#      pinned here only to compare);
#   4. PyTorch 1.13 (bench/torch_bench_small.py) on the same model at its best: tcmalloc, the
#      OpenMP OpenBLAS on the same kernels, its default and its AVX-512 ATen kernels
#      (ATEN_CPU_CAPABILITY), fp32 and bf16 autocast (its oneDNN bf16 matmul); the faster of
#      each precision is its best;
#   5. the demo's training (configs/bench-small-adamw.yaml on the English corpus, 300 steps,
#      eval every 50) with runtime.gemm openblas (before), auto (after) and auto bf16: wall time
#      and the eval loss at equal steps;
#   6. the step profile of the default fp32 and of bf16 (perf, when it can record): the GEMM
#      libraries' share and each of the model's own ops.
# Writes bench/results/gemm-engines/<cpu>/summary.{md,json} (ASTERIA_BENCH_OUT names another).
#   bench/gemm_engines.sh [STEPS] [ROUNDS]     (defaults 40 and 2; ASTERIA_DEMO_STEPS: the demo runs' steps, 300)
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-40}
ROUNDS=${2:-2}
DEMO_STEPS=${ASTERIA_DEMO_STEPS:-300}   # the demo's (scripts/demo.sh)
cmake --build build -j2 --target asteria-train bench_sgemm bench_fma_peak > /dev/null
source bench/common.sh
TOKENS=$(bench_tokens)
WORK=$(mktemp -d /tmp/asteria-gemm-engines.XXXXXX)
[ -n "${ASTERIA_KEEP_WORK:-}" ] || trap 'rm -rf "$WORK"' EXIT   # ASTERIA_KEEP_WORK=1 keeps the runs
CPU=$(cpu_kind)
OUT=${ASTERIA_BENCH_OUT:-bench/results/gemm-engines/$CPU}
mkdir -p "$OUT"
PY=/usr/bin/python3
LIB=/usr/lib/x86_64-linux-gnu
log() { echo "[gemm-engines] $*" >&2; }

log "1. FMA peak"
build/bin/bench_fma_peak > "$WORK/peak.json"

log "2. GEMMs at the model's shapes"
for g in openblas onednn auto bf16; do
  build/bin/bench_sgemm --gemm "$g" --min-time 0.2 --repeats 5 > "$WORK/sgemm-$g.json" 2> /dev/null || echo '{}' > "$WORK/sgemm-$g.json"
done
for g in openblas onednn auto; do
  DNNL_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Zen build/bin/bench_sgemm --gemm "$g" --min-time 0.2 --repeats 5 \
    > "$WORK/sgemm-avx2-$g.json" 2> /dev/null
done

train() {  # NAME CONFIG STEPS SETS...
  local name=$1 config=$2 steps=$3
  shift 3
  build/bin/asteria-train --config "configs/$config" --set "data.train=$TOKENS" --set data.eval= --set "train.steps=$steps" \
    --set train.warmup_steps=0 --set checkpoint.enabled=false --set "run.dir=$WORK/$name" --set run.overwrite=true "$@" \
    > "$WORK/$name.log" 2>&1
}
TORCH_ENV=(env LD_PRELOAD=$LIB/libtcmalloc.so.4 LD_LIBRARY_PATH=$LIB/openblas-openmp)
torch_run() {  # NAME PRECISION [ATEN capability]
  local cap=()
  [ -n "${3:-}" ] && cap=(ATEN_CPU_CAPABILITY=$3)
  "${TORCH_ENV[@]}" "${cap[@]}" $PY bench/torch_bench_small.py --threads 2 --steps 15 --warmup 3 --precision "$2" \
    > "$WORK/$1.json" 2> "$WORK/$1.err"
}
HAVE_TORCH=0
[ -f $LIB/libtcmalloc.so.4 ] && $PY -c "import torch" 2> /dev/null && HAVE_TORCH=1
AVX512=0
grep -qw avx512f /proc/cpuinfo && AVX512=1

log "3-4. training, $ROUNDS rounds of $STEPS steps"
for r in $(seq "$ROUNDS"); do
  settings="openblas-fp32 auto-fp32 auto-bf16"
  ((r % 2)) || settings="auto-bf16 auto-fp32 openblas-fp32"   # drift falls on all
  for s in $settings; do
    for opt in adamw soap; do
      train "$opt-$s-$r" "bench-small-$opt.yaml" "$STEPS" --set "runtime.gemm=${s%-*}" --set "runtime.precision=${s#*-}"
    done
  done
  for g in openblas auto; do
    OPENBLAS_CORETYPE=Haswell train "adamw-haswell-$g-$r" bench-small-adamw.yaml "$STEPS" --set "runtime.gemm=$g"
  done
  if ((HAVE_TORCH)); then
    for p in fp32 bf16; do
      torch_run "torch-$p-default-$r" "$p"
      ((AVX512)) && torch_run "torch-$p-avx512-$r" "$p" avx512
    done
  fi
done

log "5. the demo's training, $DEMO_STEPS steps"
for s in openblas-fp32 auto-fp32 auto-bf16; do
  start=$(date +%s.%N)
  build/bin/asteria-train --config configs/bench-small-adamw.yaml \
    --set "run.dir=$WORK/demo-$s" --set run.overwrite=true --set "train.steps=$DEMO_STEPS" --set train.warmup_steps=30 \
    --set train.eval_every=50 --set checkpoint.enabled=false --set "runtime.gemm=${s%-*}" --set "runtime.precision=${s#*-}" \
    > "$WORK/demo-$s.log" 2>&1
  $PY -c "print($(date +%s.%N) - $start)" > "$WORK/demo-$s.time"
done

log "6. step profile"
if command -v perf > /dev/null && perf record -o "$WORK/probe.data" true > /dev/null 2>&1; then
  for p in fp32 bf16; do
    perf record -F 499 -o "$WORK/perf-$p.data" build/bin/asteria-train --config configs/bench-small-adamw.yaml \
      --set "data.train=$TOKENS" --set data.eval= --set train.steps=30 --set train.warmup_steps=0 --set checkpoint.enabled=false \
      --set "run.dir=$WORK/perf-$p" --set run.overwrite=true --set "runtime.precision=$p" > /dev/null 2>&1
    for sort in dso dso,sym; do
      { perf report -i "$WORK/perf-$p.data" --no-children --sort $sort --stdio 2> /dev/null || true; } \
        | grep -E '^ +[0-9]' | head -24 || true
    done > "$WORK/profile-$p.txt"
  done
fi

$PY bench/gemm_engines_summary.py "$WORK" "$OUT" "$STEPS" "$ROUNDS"
log "wrote $OUT/summary.md"
