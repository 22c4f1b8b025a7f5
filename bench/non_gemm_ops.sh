#!/usr/bin/env bash
# Where a bench-small step goes besides the GEMMs, and whether AVX-512 code paths for the model's
# own ops (norms, RoPE, attention's softmax, SwiGLU, cross-entropy, AdamW) would matter on this CPU:
#   - perf's share of a bench-small AdamW training run (the shipped build) by library, and the
#     project's own functions that take the most of it;
#   - bench_model (forward + backward, and each non-GEMM op alone) on the shipped build (AVX2 + FMA,
#     CMakeLists.txt's ASTERIA_AVX2) against the same sources built for AVX-512 (-mavx512f/bw/vl/dq,
#     512-bit vectors preferred) into build-avx512/, ROUNDS interleaved rounds, medians.
# On a CPU without AVX-512 only the profile is taken. Writes
# bench/results/non-gemm-ops/<cpu>-family<F>-model<M>/summary.md (ASTERIA_BENCH_OUT names another folder).
#   bench/non_gemm_ops.sh [ROUNDS]     (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
cmake --build build -j2 --target asteria-train bench_model > /dev/null 2>&1
AVX512=0
if grep -qw avx512f /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo; then
  AVX512=1
  cmake -S . -B build-avx512 -DCMAKE_BUILD_TYPE=Release -DASTERIA_CUDA=OFF -DASTERIA_TESTS=OFF \
    "-DCMAKE_CXX_FLAGS=-mavx512f -mavx512bw -mavx512vl -mavx512dq -mprefer-vector-width=512" > /dev/null
  cmake --build build-avx512 -j2 --target bench_model > /dev/null 2>&1
fi
source bench/common.sh
TOKENS=$(bench_tokens)
WORK=$(mktemp -d /tmp/asteria-non-gemm.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
CPU=$(cpu_kind)
OUT=${ASTERIA_BENCH_OUT:-bench/results/non-gemm-ops/$CPU}
if command -v perf > /dev/null && perf record -o "$WORK/probe.data" true > /dev/null 2>&1; then
  perf record -F 499 -o "$WORK/perf.data" build/bin/asteria-train --config configs/bench-small-adamw.yaml \
    --set "data.train=$TOKENS" --set data.eval= --set train.steps=40 --set train.warmup_steps=0 \
    --set checkpoint.enabled=false --set "run.dir=$WORK/run" --set run.overwrite=true > /dev/null 2>&1
  perf report -i "$WORK/perf.data" --no-children --sort dso --stdio 2> /dev/null | grep '%' > "$WORK/dso.txt" || true
  perf report -i "$WORK/perf.data" --no-children --sort sym --dsos asteria-train --stdio 2> /dev/null |
    grep '%' | head -12 > "$WORK/own.txt" || true
fi
for r in $(seq "$ROUNDS"); do
  build/bin/bench_model bench-small 8 10 > "$WORK/avx2-$r.txt" 2>&1
  if ((AVX512)); then build-avx512/bin/bench_model bench-small 8 10 > "$WORK/avx512-$r.txt" 2>&1; fi
done
build/bin/bench_sgemm --min-time 0.3 --repeats 1 > "$WORK/sgemm.json" 2> /dev/null
mkdir -p "$OUT"
/usr/bin/python3 - "$WORK" "$ROUNDS" "$AVX512" > "$OUT/summary.md" <<'PY'
import json, os, re, statistics, sys
work, rounds, avx512 = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
blas = json.load(open(f"{work}/sgemm.json"))["blas"]
print("# The model's own ops beside the GEMMs\n")
print(f"`bench/non_gemm_ops.sh {rounds}`: {blas['cpu']} (family/model {blas['cpu_family_model']}: {blas['cpu_features']}); "
      f"OpenBLAS kernels {blas['openblas_corename']} (OPENBLAS_CORETYPE {blas['openblas_coretype_env']}).\n")
if os.path.exists(f"{work}/dso.txt"):
    print("perf, bench-small AdamW, 40 steps (the whole run), share of CPU samples by library:\n")
    print("| library | share |\n| --- | --- |")
    for line in open(f"{work}/dso.txt"):
        share, lib = line.split()[:2]
        if float(share.rstrip("%")) >= 0.5: print(f"| {lib} | {share} |")
    print("\nthe project's own functions with the most of it:\n")
    print("| function | share of all samples |\n| --- | --- |")
    for line in open(f"{work}/own.txt"):
        share, sym = line.split(None, 1)
        print(f"| `{sym.replace('[.]', '').strip()[:90]}` | {share} |")
    print()
def parse(path):
    text = open(path).read()
    step = float(re.search(r"step \(fwd\+bwd, median of \d+\) ([\d.]+) ms", text).group(1))
    ops = dict((name.strip(), float(ms)) for name, ms in re.findall(r"^  ([a-z][^\n]*?)\s+([\d.]+)$",
               text.split("per op, one call")[1], re.M))
    return step, ops
builds = ["avx2"] + (["avx512"] if avx512 else [])
runs = {b: [parse(f"{work}/{b}-{r}.txt") for r in range(1, rounds + 1)] for b in builds}
med = {b: (statistics.median(s for s, _ in runs[b]), {k: statistics.median(o[k] for _, o in runs[b]) for k in runs[b][0][1]})
       for b in builds}
print(f"bench_model bench-small (batch 8), forward + backward, medians of {rounds} interleaved rounds (ms):\n")
header = "| | shipped build (AVX2 + FMA) |" + (" AVX-512 build | AVX-512 / shipped |" if avx512 else "")
print(header)
print("| --- | --- |" + (" --- | --- |" if avx512 else ""))
def row(name, a, b=None):
    print(f"| {name} | {a:.2f} |" + (f" {b:.2f} | {b / a:.2f} |" if b is not None else ""))
row("step", med["avx2"][0], med["avx512"][0] if avx512 else None)
for k in med["avx2"][1]:
    row(k + " (one call)", med["avx2"][1][k], med["avx512"][1][k] if avx512 else None)
if not avx512:
    print("\nThis CPU has no AVX-512: only the shipped build was measured.")
PY
cat "$OUT/summary.md"
