#!/usr/bin/env bash
# The GPU machine's check, one script: CUDA tests, then the GPU benchmarks, results under OUT.
#   scripts/device_check.sh OUT
# Binaries: .device/ from scripts/device_bundle.sh when it is there (the GPU machine of this
# project has no Debian packages to build with); otherwise it configures and builds build-cuda/
# with every core, which needs Asteria's dependencies installed (scripts/setup.sh's packages).
# Writes OUT/summary.txt, the tests' JSON and logs, and the benchmarks' JSON. Each stage runs
# under its own timeout, cut to what is left of a 470-second deadline, so that the whole script
# ends inside 8 minutes whatever hangs.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: scripts/device_check.sh OUT}
mkdir -p "$OUT"
start=$(date +%s)
deadline=$(( start + 470 ))
log() { echo "[$(( $(date +%s) - start ))s] $*" | tee -a "$OUT/summary.txt"; }
# A stage's timeout: its own limit, or what is left before the deadline when that is less.
limit() {
  local left=$(( deadline - $(date +%s) ))
  (( left < 1 )) && left=1
  (( left < $1 )) && echo "$left" || echo "$1"
}
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
  timeout "$(limit 300)" cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DASTERIA_CUDA=ON > "$OUT/build.log" 2>&1 &&
    timeout "$(limit 300)" cmake --build build-cuda -j"$(nproc)" --target test_cuda test_core bench_gemm_cuda bench_model_cuda asteria-train >> "$OUT/build.log" 2>&1 ||
    { log "build failed (tail of build.log):"; tail -30 "$OUT/build.log" | tee -a "$OUT/summary.txt"; exit 1; }
  BIN=build-cuda/bin
fi
status=0
for t in test_cuda test_core; do
  timeout "$(limit 180)" "$BIN/$t" --gtest_output="json:$OUT/$t.json" > "$OUT/$t.log" 2>&1
  rc=$?
  log "$t: rc $rc, $(grep -c '^\[       OK \]' "$OUT/$t.log") passed, $(grep -c '^\[  FAILED  \]' "$OUT/$t.log") failed lines, $(grep -c '^\[  SKIPPED \]' "$OUT/$t.log") skipped"
  grep -E '^\[  FAILED  \]|Failure|relative error' "$OUT/$t.log" | head -20 | tee -a "$OUT/summary.txt"
  [[ $rc -eq 0 ]] || status=1
done
# The new paths by name: sharding on the GPU (one rank of two on this GPU; two GPUs train sharded
# where there are two) and the bf16 storage (the weights' copy in the GEMMs, the packed activations).
log "sharded and bf16 cases: $(grep -E '^\[ +(OK|FAILED|SKIPPED) +\] (DeviceShardsCuda|TwoRanksOnCuda\.Sharded|Ops\.LinearBf16|.*ModelOnCuda\.Bf16)' "$OUT/test_cuda.log" | sed -E 's/^\[ +([A-Z]+) +\] ([^ ]+).*/\2 \1/' | tr '\n' ' ')"
timeout "$(limit 120)" "$BIN/bench_gemm_cuda" --micro-batch 8 > "$OUT/bench_gemm_cuda.json" 2> "$OUT/bench_gemm_cuda.err"
log "bench_gemm_cuda: rc $? $(python3 -c "import json,sys; d=json.load(open('$OUT/bench_gemm_cuda.json')); print('bf16 %.0f TFLOP/s (%.0f %% of %g), fp32 %.0f TFLOP/s' % (d['bf16_in_fp32_out']['step_weighted_tflops'], 100*d['bf16_in_fp32_out']['fraction_of_bf16_peak'], d['peak_bf16_dense_tflops'], d['fp32']['step_weighted_tflops']))" 2>&1)"
# The whole model's forward + backward on the device (fp32 path), OLMo-1B at seq 2048.
timeout "$(limit 120)" "$BIN/bench_model_cuda" --micro-batch 4 > "$OUT/bench_model_cuda.json" 2> "$OUT/bench_model_cuda.err"
log "bench_model_cuda (OLMo-1B, micro-batch 4, fp32): rc $? $(python3 -c "import json; d=json.load(open('$OUT/bench_model_cuda.json')); print('step %.3f s, %.0f tok/s, %.1f TFLOP/s, MFU %.1f %% of the bf16 peak, %.1f GiB device' % (d['step_s_median'], d['tokens_per_s'], d['tflops'], 100*d['mfu_vs_bf16_peak'], d['device_memory_used_bytes']/2**30))" 2>&1)"
# OLMo-1B training on the GPU (runtime.backend cuda, runtime.precision bf16: the defaults): 20
# steps of each shipped config at seq 2048 on random token ids (the GPU machine has no corpus),
# the largest micro-batch of 8, 4 that fits, one micro-batch per step: AdamW, then SOAP in native
# mode (refreshes inline with cuSOLVER: the reference, with its spikes every 10 steps), in
# asteria mode (refreshes on the host workers with LAPACK, published D steps later) and in
# asteria mode with runtime.shadow.lane device (cuSOLVER on low-priority streams). SOAP's first step computes every
# block's first eigenbasis (cuSOLVER): the summary leaves out 2 warm-up steps.
python3 -c "
import array, random
random.seed(1)
array.array('H', (random.randrange(50280) for _ in range(20 * 8 * 2048 + 2049))).tofile(open('$OUT/tokens.bin', 'wb'))"
summary() {   # the step statistics of a run's metrics.jsonl, after 2 warm-up steps
  python3 - "$1" <<'PY' 2>&1
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])][2:]
t = sorted(r["step_time_s"] for r in rows)
tok = rows[0]["tokens"] / rows[0]["step"]
e = [r["energy_j"] for r in rows if "energy_j" in r]
print("tokens/step %d, step mean %.3f s p50 %.3f s p99 %.3f s max %.3f s (p99/p50 %.2f), %.0f tok/s, MFU %.1f %%, optimizer %.1f %% of the step, %s"
      % (tok, statistics.mean(t), t[len(t) // 2], t[min(len(t) - 1, int(0.99 * len(t)))], t[-1],
         t[min(len(t) - 1, int(0.99 * len(t)))] / t[len(t) // 2], tok / statistics.median(t),
         100 * statistics.median(r["mfu"] for r in rows), 100 * sum(r["optim_s"] for r in rows) / sum(t),
         "%.3f J/token" % (sum(e) / (tok * len(e))) if e else "no energy counter"))
# asteria: how long the steps waited for the host workers' refreshes (publish at t + D); a
# stall here means the workers' LAPACK is slower than one micro-batch per step (grad_accum 1)
# needs, which the shipped grad_accum (512 micro-batches per step) leaves far behind.
if "shadow_stall_s" in rows[0]:
    print("  shadow stall %.3f s/step mean (max %.3f s), refreshes in flight at the end %d"
          % (statistics.mean(r["shadow_stall_s"] for r in rows), max(r["shadow_stall_s"] for r in rows),
             rows[-1]["shadow_in_flight"]))
PY
}
train() {   # NAME CONFIG LIMIT_S [--set ...]: 20 steps, micro-batch 8 or else 4
  local name=$1 config=$2 limit=$3
  shift 3
  for mb in 8 4; do
    timeout "$(limit "$limit")" "$BIN/asteria-train" --config "$config" --set runtime.backend=cuda \
      --set data.train="$OUT/tokens.bin" --set data.eval= --set run.dir="$OUT/$name" --set run.overwrite=true \
      --set train.steps=20 --set train.warmup_steps=2 --set train.grad_accum=1 --set train.micro_batch=$mb \
      --set checkpoint.enabled=false "$@" > "$OUT/$name.log" 2>&1 && break
    local rc=$?
    log "$name at micro-batch $mb: rc $rc ($(tail -1 "$OUT/$name.log"))"
    [[ $rc -eq 124 ]] && break   # out of time: a smaller micro-batch would not finish either
  done
  log "$name: $(summary "$OUT/$name/metrics.jsonl")"
}
train olmo-1b-adamw-cuda configs/olmo-1b-adamw.yaml 100
train olmo-1b-soap-native-cuda configs/olmo-1b-soap.yaml 150 --set runtime.mode=native
train olmo-1b-soap-asteria-cuda configs/olmo-1b-soap.yaml 150 --set runtime.mode=asteria
# The same with the refreshes by the GPU's solvers on the workers' low-priority streams.
train olmo-1b-soap-asteria-device-lane-cuda configs/olmo-1b-soap.yaml 150 --set runtime.mode=asteria \
  --set runtime.shadow.lane=device
rm -f "$OUT/tokens.bin"
log "done, status $status"
exit $status
