#!/usr/bin/env bash
# The GPU machine's check, one script: CUDA tests, then the GPU benchmarks, results under OUT.
#   scripts/device_check.sh OUT
# Binaries: .device/ from scripts/device_bundle.sh when it is there (the GPU machine of this
# project has no Debian packages to build with); otherwise it configures and builds build-cuda/
# with every core, which needs Asteria's dependencies installed (scripts/setup.sh's packages).
# Writes OUT/summary.txt, the tests' JSON and logs, and the benchmarks' JSON. Each stage runs
# under a timeout so the whole script ends inside 8 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: scripts/device_check.sh OUT}
mkdir -p "$OUT"
start=$(date +%s)
log() { echo "[$(( $(date +%s) - start ))s] $*" | tee -a "$OUT/summary.txt"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt" 2>&1 ||
  { log "nvidia-smi failed: no GPU here"; cat "$OUT/gpu.txt"; exit 1; }
log "GPU: $(cat "$OUT/gpu.txt")  cores: $(nproc)"
if [[ -x .device/bin/test_cuda ]]; then
  BIN=.device/bin
  libs=$(mktemp -d)
  tar -xJf .device/lib.tar.xz -C "$libs"
  export LD_LIBRARY_PATH="$libs/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  log "binaries: .device (built by scripts/device_bundle.sh)"
else
  log "building build-cuda with $(nproc) cores"
  timeout 300 cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DASTERIA_CUDA=ON > "$OUT/build.log" 2>&1 &&
    timeout 300 cmake --build build-cuda -j"$(nproc)" --target test_cuda test_core bench_gemm_cuda asteria-train >> "$OUT/build.log" 2>&1 ||
    { log "build failed (tail of build.log):"; tail -30 "$OUT/build.log" | tee -a "$OUT/summary.txt"; exit 1; }
  BIN=build-cuda/bin
fi
status=0
for t in test_cuda test_core; do
  timeout 180 "$BIN/$t" --gtest_output="json:$OUT/$t.json" > "$OUT/$t.log" 2>&1
  rc=$?
  log "$t: rc $rc, $(grep -c '^\[       OK \]' "$OUT/$t.log") passed, $(grep -c '^\[  FAILED  \]' "$OUT/$t.log") failed lines, $(grep -c '^\[  SKIPPED \]' "$OUT/$t.log") skipped"
  grep -E '^\[  FAILED  \]|Failure|relative error' "$OUT/$t.log" | head -20 | tee -a "$OUT/summary.txt"
  [[ $rc -eq 0 ]] || status=1
done
timeout 120 "$BIN/bench_gemm_cuda" --micro-batch 8 > "$OUT/bench_gemm_cuda.json" 2> "$OUT/bench_gemm_cuda.err"
log "bench_gemm_cuda: rc $? $(python3 -c "import json,sys; d=json.load(open('$OUT/bench_gemm_cuda.json')); print('bf16 %.0f TFLOP/s (%.0f %% of %g), fp32 %.0f TFLOP/s' % (d['bf16_in_fp32_out']['step_weighted_tflops'], 100*d['bf16_in_fp32_out']['fraction_of_bf16_peak'], d['peak_bf16_dense_tflops'], d['fp32']['step_weighted_tflops']))" 2>&1)"
# Training benchmarks (OLMo-1B AdamW, SOAP native, SOAP asteria on the GPU) need the CUDA
# training path, which this version does not have yet: asteria-train trains on the CPU backend.
log "OLMo-1B GPU training benchmark: not run (no CUDA training path in this version)"
log "done, status $status"
exit $status
