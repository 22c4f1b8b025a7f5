#!/usr/bin/env bash
# runtime.placement auto under real memory pressure (train/placement_watch.hpp): configs/bench-small-soap.yaml
# trains inside a memory cgroup of LIMIT bytes that this script creates (v2 where its memory
# controller is available, else v1) and removes; after step HOG_AT another process in the same
# cgroup takes all of the cgroup's room but SLACK (and touches it), after step FREE_AT it exits. The run should move
# optimizer state to the disk tier at the first step boundary after the memory was taken and
# back after it was given back, with every loss bit-identical to the same run without a cgroup,
# and the kernel should never have to stop it. Reports the re-plans (the log lines, metrics'
# placement_replans and placement_replan_s), the step times around them, the losses against the
# unpressured run measured first in the same invocation, and the cgroup's peak and limit hits.
# The memory is taken at once, as another process would: the run can only react at its next step
# boundary, so SLACK must hold it until then, and a re-plan is due once the room left is under 5%
# of what the run holds (placement_watch.hpp): SLACK is below that.
#   bench/placement_pressure.sh [LIMIT] [SLACK] [STEPS] [HOG_AT] [FREE_AT]   defaults: 2G 24M 60 20 40
# Raw runs go under runs/bench/placement-pressure/ (gitignored); bench/results/placement-pressure/ gets the summary.
set -euo pipefail
cd "$(dirname "$0")/.."
LIMIT=${1:-2G}
SLACK=${2:-24M}
STEPS=${3:-60}
HOG_AT=${4:-20}
FREE_AT=${5:-40}
OUT=bench/results/placement-pressure
RAW=runs/bench/placement-pressure
scripts/setup.sh >/dev/null
scripts/prepare_data.sh 4096 >/dev/null
mkdir -p "$OUT" "$RAW"
bytes() { numfmt --from=iec "$1"; }
sets=(--set train.stop_after="$STEPS" --set checkpoint.enabled=false --set data.eval= --set run.overwrite=true)

# The reference: the same steps with nothing taken (no cgroup).
build/bin/asteria-train --config configs/bench-small-soap.yaml "${sets[@]}" --set run.dir="$RAW/free" > "$RAW/free.log" 2>&1

NAME=asteria-pressure-$$
if grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
  CG=/sys/fs/cgroup/$NAME; mkdir "$CG"; echo "$(bytes "$LIMIT")" > "$CG/memory.max"; VERSION=v2
elif [[ -d /sys/fs/cgroup/memory ]]; then
  CG=/sys/fs/cgroup/memory/$NAME; mkdir "$CG"; echo "$(bytes "$LIMIT")" > "$CG/memory.limit_in_bytes"; VERSION=v1
else
  echo "no cgroup memory controller here" >&2; exit 1
fi
train_pid="" hog_pid=""
cleanup() {
  for p in $hog_pid $train_pid; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rmdir "$CG" 2>/dev/null || true
}
trap cleanup EXIT
# A command started in the cgroup: this bash moves itself there and execs it (the same pid).
in_cgroup=(bash -c 'echo $$ > "$0" && exec "$@"' "$CG/cgroup.procs")
lines() { [[ -f $RAW/pressed/metrics.jsonl ]] && wc -l < "$RAW/pressed/metrics.jsonl" || echo 0; }

rm -rf "$RAW/pressed"
"${in_cgroup[@]}" build/bin/asteria-train --config configs/bench-small-soap.yaml "${sets[@]}" --set run.dir="$RAW/pressed" \
  > "$RAW/pressed.log" 2>&1 &
train_pid=$!
while (( $(lines) < HOG_AT )) && kill -0 "$train_pid" 2>/dev/null; do sleep 0.05; done
# The other process: the cgroup's room but SLACK, every page touched, held until killed.
if [[ $VERSION == v1 ]]; then used=$(cat "$CG/memory.usage_in_bytes"); else used=$(cat "$CG/memory.current"); fi
HOG=$(( $(bytes "$LIMIT") - used - $(bytes "$SLACK") ))
"${in_cgroup[@]}" /usr/bin/python3 -c '
import sys, time
b = bytearray(int(sys.argv[1]))
for i in range(0, len(b), 4096): b[i] = 1
print("taken", flush=True)
time.sleep(1e9)' "$HOG" > "$RAW/hog.log" 2>&1 &
hog_pid=$!
echo "hog of $(( HOG >> 20 )) MiB started after step $(lines) (cgroup usage then $(( used >> 20 )) MiB)"
while (( $(lines) < FREE_AT )) && kill -0 "$train_pid" 2>/dev/null; do sleep 0.05; done
hog_state=$(kill -0 "$hog_pid" 2>/dev/null && echo "held it" || echo "had been killed before")
kill "$hog_pid" 2>/dev/null || true; wait "$hog_pid" 2>/dev/null || true; hog_pid=""
echo "hog ended after step $(lines) (it $hog_state)"
hog_line="the other process took $(( HOG >> 20 )) MiB after step $HOG_AT (cgroup usage then $(( used >> 20 )) MiB), $hog_state until after step $FREE_AT"
status=0
wait "$train_pid" || status=$?
train_pid=""
if [[ $VERSION == v1 ]]; then
  cgroup_figures="peak usage $(( $(cat "$CG/memory.max_usage_in_bytes") >> 20 )) MiB of $LIMIT; limit hits (failcnt) $(cat "$CG/memory.failcnt"); $(grep oom_kill "$CG/memory.oom_control" || echo 'oom_kill n/a')"
else
  cgroup_figures="peak usage $(( $(cat "$CG/memory.peak" 2>/dev/null || echo 0) >> 20 )) MiB of $LIMIT; events: $(tr '\n' ' ' < "$CG/memory.events")"
fi

{
  echo "# runtime.placement auto under memory pressure: bench/placement_pressure.sh $LIMIT $SLACK $STEPS $HOG_AT $FREE_AT"
  echo
  echo '```'
  echo "date: $(date -u +%Y-%m-%d), git $(git rev-parse --short HEAD)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) ($(nproc) cores); OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
  echo "cgroup $VERSION: $cgroup_figures"
  echo "$hog_line"
  echo "trainer exit status: $status"
  echo '```'
  echo
  echo "## what the run said"
  echo '```'
  grep -E "placement|re-placed|runtime.tiers|could not be moved|does not fit" "$RAW/pressed.log" | cut -c1-400
  echo '```'
  echo
  /usr/bin/python3 - "$RAW" <<'EOF'
import json, sys
raw = sys.argv[1]
def load(name):
    return [json.loads(l) for l in open(f"{raw}/{name}/metrics.jsonl")]
free, pressed = load("free"), load("pressed")
same = len(free) == len(pressed) and all(a["loss"] == b["loss"] for a, b in zip(free, pressed))
print(f"losses of all {len(pressed)} steps identical to the run without a cgroup: **{'yes' if same else 'NO'}**")
print()
print("| step | loss | step s | free run's step s | tier disk MiB | placement_replans | placement_replan_s |")
print("|---|---|---|---|---|---|---|")
for a, b in zip(free, pressed):
    mark = b.get("placement_replan_s")
    near = mark is not None or any(x.get("placement_replan_s") is not None for x in pressed[max(0, b["step"] - 3):b["step"] + 2])
    if near or b["step"] in (1, len(pressed)):
        print(f"| {b['step']} | {b['loss']:.6f} | {b['step_time_s']:.3f} | {a['step_time_s']:.3f} | "
              f"{b['tier_bytes']['disk'] / 2**20:.1f} | {b.get('placement_replans', 0)} | {'' if mark is None else f'{mark:.3f}'} |")
EOF
} | tee "$OUT/summary.md"
exit "$status"
