#!/usr/bin/env bash
# Issue-4 benchmark: the disk tier. SOAP with its optimizer state four times the device + host
# budget (the rest on disk) against the same run with all state in memory: step time (mean over
# steps after warm-up, relative to in-memory; target <= 1.2x), stall of the compute lane on tier
# moves, bytes moved, and peak RSS against the budgets.
#   bench/tiers.sh [STEPS] [THREADS]      (defaults 60 and 0 = all cores)
# Every run in native mode (as bench/results/tiers-60 was measured): the tiers alone, without the
# shadow pipeline's snapshots and jobs in flight.
# Two models:
#   bench-small (4 blocks; one block's SOAP state is 39.5 MiB, a quarter of the whole state is
#     43.5 MiB, so only prefetch distance 0 fits: device 40 MiB + host 3.5 MiB);
#   bench-small with 12 blocks (490 MiB of state; device 120 MiB + host 2.5 MiB = a quarter),
#     at prefetch distance 0 and 1 (and 2 with a larger device budget).
# Raw runs (run.dir of each training: metrics.jsonl, config.yaml, run_info.json, and /usr/bin/time -v's NAME.time) go under
# runs/bench/<results folder name>/ (gitignored; ASTERIA_BENCH_RAW overrides); bench/results/ gets
# the summaries and plots only.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-60}
THREADS=${2:-0}
OUT=${ASTERIA_BENCH_OUT:-bench/results/tiers-$(date +%Y%m%d-%H%M)}
RAW=${ASTERIA_BENCH_RAW:-runs/bench/$(basename "$OUT")}
scripts/setup.sh >/dev/null
scripts/prepare_data.sh 4096 >/dev/null
mkdir -p "$OUT" "$RAW"
py=/usr/bin/python3
run() {  # NAME [SETS...]: trains, records peak RSS (KiB) from /usr/bin/time -v
  local name=$1
  shift
  local sets=()
  for s in "$@"; do sets+=(--set "$s"); done
  /usr/bin/time -v -o "$RAW/$name.time" build/bin/asteria-train --config configs/bench-small-soap.yaml \
    --set "run.dir=$RAW/$name" --set "train.steps=$STEPS" --set run.overwrite=true --set train.eval_every=0 \
    --set data.eval= --set train.warmup_steps=10 --set "runtime.threads=$THREADS" --set runtime.mode=native \
    --set "runtime.tiers.disk.path=$RAW/disk" "${sets[@]}" | tail -1
}
run small-memory
run small-disk-d0 runtime.tiers.device.bytes=40MiB runtime.tiers.host.bytes=3.5MiB runtime.tiers.prefetch_distance=0
deep=(model.n_layers=12)
run deep-memory "${deep[@]}"
for d in 0 1; do
  run "deep-disk-d$d" "${deep[@]}" runtime.tiers.device.bytes=120MiB runtime.tiers.host.bytes=2.5MiB \
    "runtime.tiers.prefetch_distance=$d"
done
# Distance 2 needs 3 blocks in flight (118.5 MiB) and, with the cache's fragmentation, 149 MiB of
# device (startup says so at 120 MiB): a larger budget, for the sweep's sake.
run deep-disk-d2 "${deep[@]}" runtime.tiers.device.bytes=149.1MiB runtime.tiers.host.bytes=2.5MiB \
  runtime.tiers.prefetch_distance=2
# The state sizes, for the report.
build/bin/asteria-train --config configs/bench-small-soap.yaml --set runtime.mode=native --dry-run |
  grep -A8 "state placement" > "$OUT/placement-small.txt"
build/bin/asteria-train --config configs/bench-small-soap.yaml --set runtime.mode=native --set model.n_layers=12 --dry-run |
  grep -A8 "state placement" > "$OUT/placement-deep.txt"

$py - "$OUT" "$STEPS" "$RAW" <<'PY' | tee "$OUT/summary.txt"
import json, pathlib, re, statistics, sys
out, steps, raw = pathlib.Path(sys.argv[1]), int(sys.argv[2]), pathlib.Path(sys.argv[3])
skip = 8   # warm-up and the first eigendecompositions
def budget_mib(name):
    cfg = (raw / name / "config.yaml").read_text()
    mib = []
    for tier in ("device", "host"):
        v = re.search(tier + r':\n\s+bytes: "([^"]+)"', cfg).group(1)
        mib.append(float(v[:-3]) if v.endswith("MiB") else float("inf"))
    return mib
def load(name):
    rows = [json.loads(l) for l in open(raw / name / "metrics.jsonl")]
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", (raw / f"{name}.time").read_text()).group(1))
    body = [r for r in rows if r["step"] > skip]
    t = [r["step_time_s"] for r in body]
    moved = sum(sum(r["tier_moved_bytes"].values()) for r in body) / len(body)
    return dict(mean=statistics.mean(t), median=statistics.median(t), max=max(t),
                stall=statistics.mean(r["tier_stall_s"] for r in body),
                staging=statistics.mean(r["tier_staging_s"] for r in body),
                moved_mib=moved / 2**20, rss_mib=rss / 1024, tiers=body[-1]["tier_bytes"],
                peak=max(r["tier_device_peak_bytes"] for r in body))
def state_mib(name):
    txt = (out / f"placement-{name}.txt").read_text()
    return float(re.search(r"device:\s+([\d.]+) MiB", txt).group(1))
summary = {}
print(f"SOAP, {steps} steps, step statistics over steps > {skip}")
for model in ("small", "deep"):
    base = load(f"{model}-memory")
    state = state_mib(model)
    print(f"\n{model}: optimizer state {state:.1f} MiB")
    print(f"  {'run':16} {'mean s':>8} {'median':>8} {'max':>8} {'vs mem':>7} {'stall s':>8} {'staging s':>9} "
          f"{'moved MiB':>9} {'dev peak MiB':>12} {'peak RSS MiB':>12}")
    names = [f"{model}-memory"] + sorted(p.name for p in raw.iterdir() if p.name.startswith(f"{model}-disk") and p.is_dir())
    for n in names:
        r = base if n == f"{model}-memory" else load(n)
        r["ratio"] = r["mean"] / base["mean"]
        summary[n] = r
        print(f"  {n:16} {r['mean']:8.3f} {r['median']:8.3f} {r['max']:8.3f} {r['ratio']:6.2f}x {r['stall']:8.3f} "
              f"{r['staging']:9.3f} {r['moved_mib']:9.1f} {r['peak'] / 2**20:12.1f} {r['rss_mib']:12.1f}")
    for n in names[1:]:
        budget = budget_mib(n)
        saved = summary[f"{model}-memory"]["rss_mib"] - summary[n]["rss_mib"]
        print(f"  {n}: budget device {budget[0]} + host {budget[1]} MiB = 1/{state / sum(budget):.2f} of the state; "
              f"peak RSS {saved:.1f} MiB below in-memory (state kept out of memory: {state - sum(budget):.1f} MiB); "
              f"step time {summary[n]['ratio']:.2f}x in-memory (target <= 1.2x)")
(out / "summary.json").write_text(json.dumps(summary, indent=1))
PY
echo "threads=$THREADS OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset}" | tee -a "$OUT/summary.txt"
$py scripts/plot_metrics.py "$RAW"/small-memory "$RAW"/small-disk-d0 "$RAW"/deep-memory "$RAW"/deep-disk-d{0,1,2} \
  --out "$OUT/plots" --labels small-memory,small-disk-d0,deep-memory,deep-disk-d0,deep-disk-d1,deep-disk-d2 >/dev/null
