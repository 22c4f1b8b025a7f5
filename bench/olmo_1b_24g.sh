#!/usr/bin/env bash
# OLMo-1B on this one machine (24 GiB, 2 cores): STEPS optimizer steps of the shipped
# configs/olmo-1b-soap-24g.yaml (SOAP, asteria mode, most optimizer state on the disk tier) and of
# its AdamW version configs/olmo-1b-adamw-24g.yaml, each as shipped except
#   train.stop_after=STEPS   the first STEPS steps of the run (same schedule)
#   checkpoint.enabled=false no ~40 GB checkpoint at the stop; data.eval= no evaluation
# Reports per step: the time split (fwd, recompute, bwd, optim, tier stall, root jobs), the bytes
# moved to and from the disk tier, the loss; the peak RSS (VmHWM, and VmRSS sampled every second)
# against --dry-run's estimate; the disk tier's throughput against dd (O_DIRECT, like the tier)
# measured in the same run; and the refusal of the same config in native mode.
#   bench/olmo_1b_24g.sh [STEPS] [OPTIMIZERS]     defaults: 3, "soap adamw"
# Raw runs go under runs/bench/olmo-1b-24g/ (gitignored); bench/results/olmo-1b-24g/ gets the summary.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-3}
OPTIMIZERS=${2:-soap adamw}
OUT=${ASTERIA_BENCH_OUT:-bench/results/olmo-1b-24g}
RAW=${ASTERIA_BENCH_RAW:-runs/bench/olmo-1b-24g}
scripts/setup.sh >/dev/null
scripts/prepare_data.sh 50280 >/dev/null
mkdir -p "$OUT" "$RAW"
{
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) ($(nproc) cores; $(grep -o 'avx512f' /proc/cpuinfo | head -1 || echo no avx512))"
  echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset}"
  echo "MemTotal: $(awk '/MemTotal/ {print $2}' /proc/meminfo) kB, MemAvailable: $(awk '/MemAvailable/ {print $2}' /proc/meminfo) kB"
  echo "git: $(git rev-parse --short HEAD)"
} | tee "$RAW/env.txt"

# The disk, as the tier uses it: 4 GiB written then read with O_DIRECT.
dd_rate() { grep -o '[0-9.,]* [GM]B/s' | tail -1; }
dd if=/dev/zero of="$RAW/dd.bin" bs=64M count=64 oflag=direct conv=fsync 2>&1 | dd_rate > "$RAW/dd_write.txt"
dd if="$RAW/dd.bin" of=/dev/null bs=64M iflag=direct 2>&1 | dd_rate > "$RAW/dd_read.txt"
rm -f "$RAW/dd.bin"
echo "dd write $(cat "$RAW/dd_write.txt"), read $(cat "$RAW/dd_read.txt")"

for opt in $OPTIMIZERS; do
  cfg=configs/olmo-1b-$opt-24g.yaml
  sets=(--set "train.stop_after=$STEPS" --set checkpoint.enabled=false --set data.eval= --set "run.dir=$RAW/$opt" --set run.overwrite=true)
  build/bin/asteria-train --config "$cfg" "${sets[@]}" --dry-run > "$RAW/$opt.dry-run.txt"
  # Native mode with all state in memory: refused at startup with the bytes.
  if build/bin/asteria-train --config "$cfg" "${sets[@]}" --set runtime.mode=native \
      --set runtime.tiers.device.bytes=unlimited --set runtime.tiers.host.bytes=unlimited > "$RAW/$opt.native.txt" 2>&1; then
    echo "native mode was not refused" >&2; exit 1
  fi
  /usr/bin/time -v -o "$RAW/$opt.time" build/bin/asteria-train --config "$cfg" "${sets[@]}" > "$RAW/$opt.log" 2>&1 &
  pid=$!
  sleep 1
  train_pid=$(pgrep -P "$pid" asteria-train || echo "$pid")
  : > "$RAW/$opt.rss"
  while kill -0 "$pid" 2>/dev/null; do
    awk -v t="$(date +%s)" '/VmRSS/ {print t, $2}' "/proc/$train_pid/status" >> "$RAW/$opt.rss" 2>/dev/null || true
    sleep 1
  done
  wait "$pid"
  tail -1 "$RAW/$opt.log"
done

python3 - "$OUT" "$RAW" "$STEPS" "$OPTIMIZERS" <<'PY' | tee "$OUT/summary.md"
import json, pathlib, re, sys
out, raw, steps, opts = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split()
GiB = 1 << 30
def rate(name):  # dd's figure in bytes/s
    v, unit = (raw / name).read_text().split()
    return float(v.replace(",", ".")) * (1e9 if unit.startswith("G") else 1e6)
dd_w, dd_r = rate("dd_write.txt"), rate("dd_read.txt")
print("# OLMo-1B on one 24 GiB machine: bench/olmo_1b_24g.sh", steps)
print()
print("```\n" + (raw / "env.txt").read_text().strip() + f"\ndd (O_DIRECT, 4 GiB): write {dd_w/1e9:.2f} GB/s, read {dd_r/1e9:.2f} GB/s\n```")
for opt in opts:
    recs = [json.loads(l) for l in (raw / opt / "metrics.jsonl").read_text().splitlines() if l.strip()]
    dry = (raw / f"{opt}.dry-run.txt").read_text()
    est = re.search(r"in memory:\s+([0-9.]+) GiB", dry).group(1)
    hwm = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", (raw / f"{opt}.time").read_text()).group(1)) * 1024
    sampled = max((int(l.split()[1]) for l in (raw / f"{opt}.rss").read_text().splitlines()), default=0) * 1024
    native = (raw / f"{opt}.native.txt").read_text().strip().splitlines()[-1]
    print(f"\n## {opt}: configs/olmo-1b-{opt}-24g.yaml\n")
    print(f"peak RSS: {hwm/GiB:.2f} GiB (VmHWM; sampled VmRSS max {sampled/GiB:.2f} GiB); --dry-run estimate "
          f"{est} GiB (peak / estimate {hwm/GiB/float(est):.3f})\n")
    print("| step | loss | step s | fwd s | recompute s | bwd s | optim s | tier stall s | root jobs s | disk read GB | disk write GB | tier staging s | disk GB/s (vs dd time) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in recs:
        moved = r.get("tier_moved_bytes", {})
        rd, wr = moved.get("disk_to_device", 0), moved.get("device_to_disk", 0)
        staging = r.get("tier_staging_s", 0)
        dd_time = rd / dd_r + wr / dd_w
        eff = f"{(rd + wr) / staging / 1e9:.2f} ({dd_time / staging:.2f} of dd)" if staging > 0 else "-"
        print(f"| {r['step']} | {r['loss']:.4f} | {r['step_time_s']:.1f} | {r['fwd_s']:.1f} | {r.get('recompute_s', 0):.1f} | "
              f"{r['bwd_s']:.1f} | {r['optim_s']:.1f} | {r.get('tier_stall_s', 0):.2f} | {r.get('root_jobs_s', 0):.1f} | "
              f"{rd/1e9:.2f} | {wr/1e9:.2f} | {staging:.1f} | {eff} |")
    print(f"\nnative mode (runtime.mode=native, tier budgets unlimited): `{native}`")
PY
