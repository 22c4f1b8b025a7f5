#!/usr/bin/env bash
# OLMo-1B on this one machine (24 GiB, 2 cores): STEPS optimizer steps of the shipped recipes
# configs/olmo-1b-soap.yaml and configs/olmo-1b-adamw.yaml as a user runs them, placed by
# runtime.placement auto (tier budgets, recompute, head chunk, ... chosen for this machine's
# memory), each as shipped except
#   data.train=data/generated/tok50280/train.bin   the README's prepare step's token files
#   train.micro_batch=1 train.grad_accum=1        one 2048-token instance per step, so that a step
#                                                 takes minutes here (the recipe's batch is 2048)
#   train.stop_after=STEPS   the first STEPS steps of the run (same schedule)
#   checkpoint.enabled=false no ~40 GB checkpoint at the stop; data.eval= no evaluation
# Extra --set arguments (after OPTIMIZERS) apply to every run (e.g. runtime.memory_limit=12GiB).
# Reports per step: the time split (fwd, recompute, bwd, optim, tier stall, root jobs), the bytes
# moved to and from the disk tier, the loss; the peak RSS (VmHWM, and VmRSS sampled every second)
# against --dry-run's estimate; the placement chosen; the disk tier's throughput against dd
# (O_DIRECT, like the tier) measured in the same run; and the refusal of native mode with
# placement manual (everything in memory).
#   bench/olmo_1b_24g.sh [STEPS] [OPTIMIZERS] [--set KEY=VALUE ...]    defaults: 3, "soap adamw"
# Raw runs go under runs/bench/olmo-1b-24g/ (gitignored); bench/results/olmo-1b-24g/ gets the summary.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-3}
OPTIMIZERS=${2:-soap adamw}
shift $(( $# < 2 ? $# : 2 ))
EXTRA=("$@")
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
  cfg=configs/olmo-1b-$opt.yaml
  sets=(--set data.train=data/generated/tok50280/train.bin --set train.micro_batch=1 --set train.grad_accum=1
        --set "train.stop_after=$STEPS" --set checkpoint.enabled=false --set data.eval= --set "run.dir=$RAW/$opt" --set run.overwrite=true
        "${EXTRA[@]}")
  build/bin/asteria-train --config "$cfg" "${sets[@]}" --dry-run > "$RAW/$opt.dry-run.txt"
  # Native mode with all state in memory: where its estimate is over the limit, refused at
  # startup with the bytes (checked); where it fits (AdamW, just), only the estimate is recorded.
  native=(--set runtime.mode=native --set runtime.placement=manual)
  build/bin/asteria-train --config "$cfg" "${sets[@]}" "${native[@]}" --dry-run > "$RAW/$opt.native-dry-run.txt"
  if awk '/^in memory:/ {need = $3} /^memory limit:/ {limit = $3} END {exit !(need > limit)}' "$RAW/$opt.native-dry-run.txt"; then
    if build/bin/asteria-train --config "$cfg" "${sets[@]}" "${native[@]}" > "$RAW/$opt.native.txt" 2>&1; then
      echo "native mode was not refused" >&2; exit 1
    fi
  else
    echo "native mode fits: $(grep '^in memory:' "$RAW/$opt.native-dry-run.txt" | cut -c19-) against the $(grep '^memory limit:' "$RAW/$opt.native-dry-run.txt" | cut -c19-)" > "$RAW/$opt.native.txt"
  fi
  /usr/bin/time -v -o "$RAW/$opt.time" build/bin/asteria-train --config "$cfg" "${sets[@]}" > "$RAW/$opt.log" 2>&1 &
  pid=$!
  sleep 1
  train_pid=$(pgrep -P "$pid" asteria-train || echo "$pid")
  : > "$RAW/$opt.rss"
  peak=0
  while kill -0 "$pid" 2>/dev/null; do
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$train_pid/status" 2>/dev/null || true)
    if [[ -n $rss ]]; then
      echo "$(date +%s) $rss" >> "$RAW/$opt.rss"
      # The mappings at the highest RSS seen: bench/smaps_top.py says what is resident there.
      if (( rss > peak )); then peak=$rss; cp "/proc/$train_pid/smaps" "$RAW/$opt.smaps" 2>/dev/null || true; fi
    fi
    sleep 1
  done
  wait "$pid"
  tail -1 "$RAW/$opt.log"
done

/usr/bin/python3 bench/olmo_1b_24g_summary.py "$OUT" "$RAW" "$STEPS" "$OPTIMIZERS" | tee "$OUT/summary.md"
for opt in $OPTIMIZERS; do
  { echo; echo "## $opt: the placement chosen (--dry-run)"; echo '```'; sed -n '/^# placement/,/^$/p' "$RAW/$opt.dry-run.txt"; echo '```'; } | tee -a "$OUT/summary.md"
  if [[ -s $RAW/$opt.smaps ]]; then
    { echo; echo "## $opt: what is resident at the peak (bench/smaps_top.py)"; echo; /usr/bin/python3 bench/smaps_top.py "$RAW/$opt.smaps" 25; } | tee -a "$OUT/summary.md"
  fi
done
