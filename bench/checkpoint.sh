#!/usr/bin/env bash
# Checkpoint benchmark (issue 11 "Benchmarks"): checkpoint size, write time and resume time for
# bench-small SOAP and for OLMo-1B SOAP-sized state, against the disk's sequential rates measured
# in the same run. Targets: write rate >= 70 % of dd's; with checkpoint.async the step is held
# <= 10 % of the synchronous write time.
#
#   bench/checkpoint.sh [--steps N] [--every N] [--slice-gib G] [--small-rounds N] [--train-rounds N]
#                       [--skip-olmo]
#
# One command:
#   (a) builds asteria-train and bench_checkpoint (-j2) if needed; prints OPENBLAS_CORETYPE /
#       OPENBLAS_L2_SIZE as found (never sets them);
#   (b) bench-small SOAP state, SMALL_ROUNDS rounds (default 5) of
#         dd if=/dev/zero of=FILE bs=16M count=N conv=fsync   N x 16 MiB >= the checkpoint's size
#         dd if=FILE of=/dev/null bs=16M                       after dropping the page cache
#         bench_checkpoint --config configs/bench-small-soap.yaml --drop-caches --copy-test
#       interleaved (the disk is shared and noisy: medians over rounds); --copy-test also times
#       copying the state into the image, what the step is held for with checkpoint.async;
#   (c) OLMo-1B SOAP state (params + every optimizer state tensor the trainer checkpoints, 35.1 GiB;
#       this machine has 24 GiB, so written as files of <= SLICE_GIB GiB, default 6, of one
#       checkpoint, see bench/bench_checkpoint.cpp), between two dd write runs of the same size
#       (conv=fsync) and one dd read run after dropping the page cache: the baseline is the mean of
#       the two dd writes;
#   (d) a real training of configs/bench-small-soap.yaml in native mode (as bench/results/checkpoint
#       was measured) on random tokens (as bench/throughput.sh makes them), STEPS steps (default 30), checkpoint.every=EVERY (default 10), once with
#       checkpoint.async=false and once with true, in TRAIN_ROUNDS rounds (default 2; the order
#       alternates): per checkpoint checkpoint_s (the step was held), checkpoint_write_s and
#       checkpoint_bytes from metrics.jsonl, and each run's CPU share (CPU seconds / (wall x
#       cores): others' load on this shared machine shows there); then a resume of each
#       (--resume latest, train.steps=STEPS+1, checkpoint.enabled=false, page cache dropped first)
#       under strace -tt: the restore time is from Checkpointer::restore's open of the
#       checkpoint's manifest.json (the one right before rank00000.h5 is opened) to the trainer's
#       next file, metrics.jsonl (cut back to the checkpoint); the verify part ends at the second
#       open of rank00000.h5 (HDF5 opening it after verify_files' hash);
#   (e) writes bench/results/checkpoint/summary.json and summary.md (summaries only), with the
#       load average at the start of each phase.
# Raw outputs (dd logs, bench JSON lines, training runs, strace logs) stay under
# runs/bench-checkpoint-<date>/ (gitignored), removed at the end except the small ones
# (CKBENCH_KEEP=1 keeps the training runs too).
# The page cache is dropped with `sync; echo 3 > /proc/sys/vm/drop_caches` (root); the summary says
# whether that worked. Needs about the OLMo state's size (37.7 GB) free on this filesystem.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

STEPS=30
EVERY=10
SLICE_GIB=6
SMALL_ROUNDS=5
SKIP_OLMO=0
TRAIN_ROUNDS=2
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) STEPS=$2; shift 2 ;;
    --every) EVERY=$2; shift 2 ;;
    --slice-gib) SLICE_GIB=$2; shift 2 ;;
    --small-rounds) SMALL_ROUNDS=$2; shift 2 ;;
    --skip-olmo) SKIP_OLMO=1; shift ;;
    --train-rounds) TRAIN_ROUNDS=$2; shift 2 ;;
    *) echo "usage: bench/checkpoint.sh [--steps N] [--every N] [--slice-gib G] [--small-rounds N] [--train-rounds N] [--skip-olmo]" >&2; exit 2 ;;
  esac
done

PY=/usr/bin/python3
BUILD=${ASTERIA_BUILD_DIR:-build}
STAMP=$(date +%Y%m%d-%H%M%S)
WORK=$ROOT/runs/bench-checkpoint-$STAMP
OUTDIR=bench/results/checkpoint
mkdir -p "$WORK" "$OUTDIR"
RAW=$WORK/raw.jsonl
: > "$RAW"
log() { echo "[checkpoint] $*" >&2; }
log "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-(unset)} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE-(unset)} (as found; not changed)"
log "raw outputs under $WORK"

# (a) build
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release > "$WORK/cmake.log" 2>&1 || { cat "$WORK/cmake.log" >&2; exit 1; }
fi
log "building asteria-train, bench_checkpoint"
cmake --build "$BUILD" -j2 --target asteria-train bench_checkpoint > "$WORK/build.log" 2>&1 || { tail -30 "$WORK/build.log" >&2; exit 1; }
BENCH=$BUILD/bin/bench_checkpoint
TRAIN=$BUILD/bin/asteria-train

drop_caches() {  # prints done / failed
  sync
  if echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then echo done; else echo failed; fi
}
# dd_write WHAT BYTES: dd of at least BYTES (16 MiB blocks) with conv=fsync, into $WORK/dd.bin
dd_write() {
  local what=$1 count=$(( ($2 + 16777215) / 16777216 )) out
  out=$(dd if=/dev/zero of="$WORK/dd.bin" bs=16M count="$count" conv=fsync 2>&1 | tail -1)
  echo "$out" >> "$WORK/dd.log"
  $PY -c "import json,sys; w=sys.argv[2].split(); print(json.dumps({'bench':'dd','op':'write','what':sys.argv[1],'bytes':int(w[0]),'s':float(w[-4])}))" "$what" "$out" >> "$RAW"
}
dd_read() {  # WHAT (reads $WORK/dd.bin after dropping the page cache)
  local dropped out
  dropped=$(drop_caches)
  out=$(dd if="$WORK/dd.bin" of=/dev/null bs=16M 2>&1 | tail -1)
  echo "$out" >> "$WORK/dd.log"
  $PY -c "import json,sys; w=sys.argv[2].split(); print(json.dumps({'bench':'dd','op':'read','what':sys.argv[1],'bytes':int(w[0]),'s':float(w[-4]),'drop_caches':sys.argv[3]}))" "$1" "$out" "$dropped" >> "$RAW"
}
phase() {  # WHAT: the load average as the phase starts
  echo "{\"bench\": \"phase\", \"what\": \"$1\", \"loadavg\": \"$(cat /proc/loadavg)\", \"t\": $(date +%s)}" >> "$RAW"
}
layout_bytes() {  # CONFIG -> the state's bytes
  "$BENCH" --config "$1" --layout-only 2>/dev/null | $PY -c "import json,sys; print(json.load(sys.stdin)['state_bytes'])"
}

LOAD_START=$(cat /proc/loadavg)
T_START=$(date +%s)

# (b) bench-small SOAP state
SMALL_BYTES=$(layout_bytes configs/bench-small-soap.yaml)
log "bench-small SOAP state: $SMALL_BYTES bytes; $SMALL_ROUNDS rounds of dd + bench_checkpoint"
phase small
for r in $(seq "$SMALL_ROUNDS"); do
  dd_write small "$SMALL_BYTES"; dd_read small; rm -f "$WORK/dd.bin"
  "$BENCH" --config configs/bench-small-soap.yaml --dir "$WORK/ck-small/checkpoints" --drop-caches --copy-test --label "small r$r" \
    >> "$RAW" 2>> "$WORK/bench-small.log" || { log "bench_checkpoint failed"; tail -5 "$WORK/bench-small.log" >&2; exit 1; }
done

# (c) OLMo-1B SOAP state
if [ "$SKIP_OLMO" = 0 ]; then
  OLMO_BYTES=$(layout_bytes configs/olmo-1b-soap.yaml)
  AVAIL=$(( $(df --output=avail -B1 "$WORK" | tail -1) ))
  if [ "$AVAIL" -lt $(( OLMO_BYTES + OLMO_BYTES / 10 + (2 << 30) )) ]; then
    log "only $AVAIL bytes free, the OLMo-1B state needs $OLMO_BYTES: skipped"
    SKIP_OLMO="no space ($AVAIL bytes free)"
  else
    log "OLMo-1B SOAP state: $OLMO_BYTES bytes: dd write, dd read, bench_checkpoint (files <= $SLICE_GIB GiB), dd write"
    phase olmo
    dd_write olmo-before "$OLMO_BYTES"; dd_read olmo; rm -f "$WORK/dd.bin"
    "$BENCH" --config configs/olmo-1b-soap.yaml --dir "$WORK/ck-olmo/checkpoints" --slice-gib "$SLICE_GIB" --drop-caches \
      --label olmo >> "$RAW" 2> "$WORK/bench-olmo.log" || { log "bench_checkpoint failed"; tail -5 "$WORK/bench-olmo.log" >&2; exit 1; }
    dd_write olmo-after "$OLMO_BYTES"; rm -f "$WORK/dd.bin"
    rm -rf "$WORK/ck-olmo"
  fi
fi

# (d) training bench-small SOAP, async and sync checkpoints, and resumes
TOKENS=data/generated/bench/random-v4096-4M.u16
if [ ! -s "$TOKENS" ]; then
  log "writing $TOKENS"
  mkdir -p "$(dirname "$TOKENS")"
  $PY -c "import numpy as np; np.random.default_rng(0).integers(0, 4096, size=4_000_000, dtype=np.uint16).tofile('$TOKENS')"
fi
TRAIN_SET=(--set data.train="$ROOT/$TOKENS" --set data.eval= --set train.warmup_steps=0 --set runtime.mode=native)
STRACE=$(command -v strace || true)
phase train
for r in $(seq "$TRAIN_ROUNDS"); do
  order="false true"
  [ $((r % 2)) = 0 ] && order="true false"
  for a in $order; do
    name=train-r$r-async-$a
    dir=$WORK/$name
    log "round $r: training bench-small SOAP, $STEPS steps, checkpoint.every=$EVERY, checkpoint.async=$a"
    /usr/bin/time -f '%e %U %S' -o "$WORK/$name.time" \
      "$TRAIN" --config configs/bench-small-soap.yaml "${TRAIN_SET[@]}" --set train.steps="$STEPS" \
      --set checkpoint.every="$EVERY" --set checkpoint.async="$a" --set run.dir="$dir" --set run.overwrite=true \
      > "$WORK/$name.log" 2>&1 || { log "training failed"; tail -5 "$WORK/$name.log" >&2; exit 1; }
    read -r wall user sys < "$WORK/$name.time"
    echo "{\"bench\": \"train\", \"round\": $r, \"async\": $a, \"dir\": \"$dir\", \"wall_s\": $wall, \"cpu_s\": $(echo "$user + $sys" | bc)}" >> "$RAW"
    log "round $r: resuming it (--resume latest, page cache dropped)"
    dropped=$(drop_caches)
    t0=$(date +%s.%N)
    ${STRACE:+$STRACE -f -tt -e trace=openat -o "$WORK/resume-$name.strace"} \
      "$TRAIN" --config configs/bench-small-soap.yaml "${TRAIN_SET[@]}" --set train.steps=$((STEPS + 1)) \
      --set checkpoint.every="$EVERY" --set checkpoint.async="$a" --set run.dir="$dir" --set checkpoint.enabled=false \
      --resume latest > "$WORK/resume-$name.log" 2>&1 || { log "resume failed"; tail -5 "$WORK/resume-$name.log" >&2; exit 1; }
    t1=$(date +%s.%N)
    echo "{\"bench\": \"resume\", \"round\": $r, \"async\": $a, \"dir\": \"$dir\", \"wall_s\": $(echo "$t1 - $t0" | bc), \"drop_caches\": \"$dropped\", \"strace\": \"${STRACE:+$WORK/resume-$name.strace}\"}" >> "$RAW"
  done
done
LOAD_END=$(cat /proc/loadavg)
T_END=$(date +%s)

# (e) summary
LOAD_START=$LOAD_START LOAD_END=$LOAD_END WALL=$((T_END - T_START)) STEPS=$STEPS EVERY=$EVERY SLICE_GIB=$SLICE_GIB \
SMALL_ROUNDS=$SMALL_ROUNDS SKIP_OLMO=$SKIP_OLMO STAMP=$STAMP \
$PY - "$RAW" "$OUTDIR" <<'EOF'
import json, os, re, statistics, sys, subprocess
raw_path, outdir = sys.argv[1], sys.argv[2]
recs = [json.loads(l) for l in open(raw_path) if l.strip()]
med = statistics.median
E = os.environ
MB = 1e6

def rate(x):  # dd record -> bytes/s
    return x["bytes"] / x["s"]

res = {"date": E["STAMP"], "script": "bench/checkpoint.sh",
       "OPENBLAS_CORETYPE": E.get("OPENBLAS_CORETYPE", "(unset)"), "OPENBLAS_L2_SIZE": E.get("OPENBLAS_L2_SIZE", "(unset)"),
       "nproc": os.cpu_count(), "loadavg_start": E["LOAD_START"], "loadavg_end": E["LOAD_END"], "wall_s": int(E["WALL"])}
try:
    res["cpu"] = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    res["mem_gib"] = round(int(next(l.split()[1] for l in open("/proc/meminfo") if l.startswith("MemTotal"))) / 2**20, 1)
    res["filesystem"] = subprocess.run(["df", "--output=fstype,source", raw_path], capture_output=True,
                                       text=True).stdout.split("\n")[1].strip()
except Exception:
    pass

# bench-small SOAP state
small = [x for x in recs if x["bench"] == "checkpoint" and x["label"].startswith("small")]
dd_small = [x for x in recs if x["bench"] == "dd" and x["what"] == "small" and x["op"] == "write"]
dd_small_read = [x for x in recs if x["bench"] == "dd" and x["what"] == "small" and x["op"] == "read"]
if small:
    s0 = small[0]
    res["small"] = {
        "config": s0["config"], "file_bytes": s0["file_bytes"], "files": s0["files"],
        "param_bytes": s0["param_bytes"], "optimizer_state_bytes": s0["optimizer_state_bytes"], "rounds": len(small),
        "drop_caches": sorted({x["drop_caches"] for x in small}),
        "dd_write_Bps": med(rate(x) for x in dd_small), "dd_write_Bps_per_round": [rate(x) for x in dd_small],
        "dd_bytes": dd_small[0]["bytes"],
        "write_s": med(x["write_s"] for x in small), "write_Bps": med(x["write_rate_Bps"] for x in small),
        "write_Bps_per_round": [x["write_rate_Bps"] for x in small],
        "write_image_s": med(x["write_image_s"] for x in small), "fsync_s": med(x["fsync_s"] for x in small),
        "commit_rest_s": med(x["commit_rest_s"] for x in small),
        "hash_hot_Bps": med(x["hash_hot_rate_Bps"] for x in small), "hash_cold_Bps": med(x["hash_cold_rate_Bps"] for x in small),
        "verify_s": med(x["verify_s"] for x in small), "read_image_s": med(x["read_image_s"] for x in small),
        "read_s": med(x["read_s"] for x in small), "read_Bps": med(x["read_rate_Bps"] for x in small),
        "read_image_cold_Bps": med(x["read_image_cold_rate_Bps"] for x in small),
        "dd_read_Bps": med(rate(x) for x in dd_small_read) if dd_small_read else None}
    cp = [x["copy_test"] for x in small if x.get("copy_test")]
    if cp:
        res["small"]["copy_into_image"] = {k: med(c[k] for c in cp) for k in ("copy_1thread_s", "copy_parallel_s", "copy_first_s")}
        res["small"]["copy_into_image"]["threads"] = cp[0]["threads"]
    s = res["small"]
    s["write_over_dd"] = s["write_Bps"] / s["dd_write_Bps"]
    s["write_over_dd_per_round"] = [round(x["write_rate_Bps"] / rate(d), 3) for x, d in zip(small, dd_small)]

# OLMo-1B SOAP state
olmo = [x for x in recs if x["bench"] == "checkpoint" and x["label"] == "olmo"]
if olmo:
    o = olmo[0]
    ddw = [x for x in recs if x["bench"] == "dd" and x["what"].startswith("olmo-")]
    ddr = [x for x in recs if x["bench"] == "dd" and x["op"] == "read" and x["what"] == "olmo"]
    o = {k: o[k] for k in o if k not in ("bench", "label", "overrides", "kept")}
    o["dd_write_Bps_before_after"] = [rate(x) for x in ddw]
    o["dd_write_Bps"] = sum(rate(x) for x in ddw) / len(ddw)
    o["dd_bytes"] = ddw[0]["bytes"]
    if ddr:
        o["dd_read_Bps"] = rate(ddr[0])
        o["dd_read_drop_caches"] = ddr[0]["drop_caches"]
    o["write_over_dd"] = o["write_rate_Bps"] / o["dd_write_Bps"]
    o["write_over_dd_each"] = [o["write_rate_Bps"] / rate(x) for x in ddw]
    if ddr:
        o["read_over_dd_read"] = o["read_rate_Bps"] / o["dd_read_Bps"]
    res["olmo"] = o
elif E["SKIP_OLMO"] != "0":
    res["olmo"] = {"skipped": E["SKIP_OLMO"] if E["SKIP_OLMO"] != "1" else "--skip-olmo"}

# training runs
def rows_of(d):
    return [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl")) if l.strip()]

def parse_strace(path):
    ev = []
    for line in open(path):
        m = re.match(r"\d+\s+(\d+):(\d+):(\d+\.\d+) openat\(AT_FDCWD, \"([^\"]+)\"", line)
        if m and "ENOENT" not in line:
            ev.append((int(m[1]) * 3600 + int(m[2]) * 60 + float(m[3]), m[4]))
    rank = [i for i, (_, p) in enumerate(ev) if p.endswith("rank00000.h5")]
    if not rank:
        return None
    start = max(i for i in range(rank[0]) if ev[i][1].endswith("manifest.json"))
    end = next(i for i in range(rank[0], len(ev)) if ev[i][1].endswith("metrics.jsonl"))
    out = {"restore_s": ev[end][0] - ev[start][0], "process_start_to_restored_s": ev[end][0] - ev[0][0]}
    if len(rank) > 1:
        out["verify_files_s"] = ev[rank[1]][0] - ev[rank[0]][0]
        out["read_and_load_s"] = ev[end][0] - ev[rank[1]][0]
    return out

runs = []
for t in (x for x in recs if x["bench"] == "train"):
    rows = [r for r in rows_of(t["dir"]) if r["step"] <= int(E["STEPS"])]
    # checkpoint_s is on the line of the step after the save: with checkpoint.async that step also
    # ran the copy beside its forward (checkpoint_copy_s), so its step_time_s shows the copy's cost.
    ck = [{"step": r["step"] - 1, "checkpoint_s": r["checkpoint_s"], "next_step_s": r["step_time_s"],
           "copy_s": r.get("checkpoint_copy_s")} for r in rows if "checkpoint_s" in r]
    writes = [{"reported_at_step": r["step"], "checkpoint_write_s": r["checkpoint_write_s"],
               "checkpoint_bytes": r["checkpoint_bytes"]} for r in rows if "checkpoint_write_s" in r]
    steps = [r["step_time_s"] for r in rows if "checkpoint_s" not in r and r["step"] > 1]
    run = {"round": t["round"], "async": t["async"], "checkpoints": ck, "writes": writes,
           "median_step_s": med(steps) if steps else None,
           "cpu_share": round(t["cpu_s"] / (t["wall_s"] * (os.cpu_count() or 1)), 2) if t["wall_s"] else None}
    rs = [x for x in recs if x["bench"] == "resume" and x["round"] == t["round"] and x["async"] == t["async"]]
    if rs:
        run["resume"] = {"wall_s": rs[0]["wall_s"], "drop_caches": rs[0]["drop_caches"]}
        if rs[0]["strace"]:
            run["resume"].update(parse_strace(rs[0]["strace"]) or {})
    runs.append(run)
res["train"] = {"config": "configs/bench-small-soap.yaml", "steps": int(E["STEPS"]), "every": int(E["EVERY"]),
                "data": "random tokens, vocab 4096 (data/generated/bench/random-v4096-4M.u16)", "runs": runs}
sync_runs = [r for r in runs if not r["async"]]
async_runs = [r for r in runs if r["async"]]
if sync_runs and async_runs:
    sync_w = [w["checkpoint_write_s"] for r in sync_runs for w in r["writes"]]
    ref = med(sync_w)
    first = [r["checkpoints"][0]["checkpoint_s"] for r in async_runs if r["checkpoints"]]
    later = [c["checkpoint_s"] for r in async_runs for c in r["checkpoints"][1:]]
    tr = res["train"]
    tr["sync_write_s_median"] = ref
    tr["sync_hold_s_median"] = med(c["checkpoint_s"] for r in sync_runs for c in r["checkpoints"])
    tr["async_hold_s_first"] = first
    tr["async_hold_s_later_median"] = med(later) if later else None
    tr["async_hold_over_sync_write_first"] = [h / ref for h in first]
    tr["async_hold_over_sync_write_after_first"] = med(later) / ref if later else None
    per_round = []
    for r in sorted({x["round"] for x in runs}):
        sw = [w["checkpoint_write_s"] for x in sync_runs if x["round"] == r for w in x["writes"]]
        ah = [c["checkpoint_s"] for x in async_runs if x["round"] == r for c in x["checkpoints"][1:]]
        if sw and ah:
            per_round.append(round(med(ah) / med(sw), 3))
    tr["async_hold_over_sync_write_after_first_per_round"] = per_round
    # What the overlapped copy costs the step that carries it: against the same step of the
    # synchronous runs (not the run's median step: with precondition_frequency 10 the step after
    # a checkpoint at 10, 20 is also a refresh step, slow in both).
    a_next = [c["next_step_s"] for r in async_runs for c in r["checkpoints"][1:]]
    s_next = [c["next_step_s"] for r in sync_runs for c in r["checkpoints"][1:]]
    tr["async_next_step_s_median"] = med(a_next) if a_next else None
    tr["sync_next_step_s_median"] = med(s_next) if s_next else None
    copies = [c["copy_s"] for r in async_runs for c in r["checkpoints"][1:] if c["copy_s"]]
    tr["async_copy_s_median"] = med(copies) if copies else None

# headline and targets
h = {}
if "small" in res:
    h["small_write_over_dd"] = res["small"]["write_over_dd"]
if "olmo" in res and "write_over_dd" in res["olmo"]:
    h["olmo_write_over_dd"] = res["olmo"]["write_over_dd"]
h["write_target"] = 0.7
if "async_hold_over_sync_write_after_first" in res["train"]:
    h["async_hold_over_sync_write_first"] = res["train"]["async_hold_over_sync_write_first"]
    h["async_hold_over_sync_write_after_first"] = res["train"]["async_hold_over_sync_write_after_first"]
h["hold_target"] = 0.1
res["phases"] = [x for x in recs if x["bench"] == "phase"]
res = {"headline": h, **res}
with open(os.path.join(outdir, "summary.json"), "w") as f:
    json.dump(res, f, indent=2)
    f.write("\n")

# markdown
L = []
gb = lambda b: f"{b / 1e9:.3f} GB ({b / 2**30:.2f} GiB)"
L.append(f"# Checkpoint benchmark ({res['date']})\n")
L.append("Regenerate: `bench/checkpoint.sh` (see its header; raw outputs stay under `runs/`). "
         f"Machine: {res.get('cpu', '?')}, {res['nproc']} CPUs, {res.get('mem_gib', '?')} GiB, filesystem "
         f"{res.get('filesystem', '?')}; shared, load average {res['loadavg_start']} at the start. "
         f"OPENBLAS_CORETYPE={res['OPENBLAS_CORETYPE']}, OPENBLAS_L2_SIZE={res['OPENBLAS_L2_SIZE']} (as found). "
         f"Page cache dropped between write and read: {', '.join(res['small']['drop_caches']) if 'small' in res else '?'}.\n")
L.append("## Write and read rates against dd\n")
L.append("| state | checkpoint | files | dd write (conv=fsync) | checkpoint write | write / dd | write_image + fsync | commit rest (hash, rename, manifest) | dd read | resume read (verify + read_image) | read_image from disk |")
L.append("|---|---|---|---|---|---|---|---|---|---|---|")
if "small" in res:
    s = res["small"]
    L.append(f"| bench-small SOAP (median of {s['rounds']} rounds) | {gb(s['file_bytes'])} | {s['files']} | "
             f"{s['dd_write_Bps'] / MB:.0f} MB/s | {s['write_Bps'] / MB:.0f} MB/s ({s['write_s']:.3f} s) | "
             f"**{s['write_over_dd']:.2f}** (per round {s['write_over_dd_per_round']}) | {s['write_image_s'] + s['fsync_s']:.3f} s | "
             f"{s['commit_rest_s']:.3f} s | {(s['dd_read_Bps'] or 0) / MB:.0f} MB/s | {s['read_Bps'] / MB:.0f} MB/s ({s['verify_s']:.3f} + {s['read_image_s']:.3f} s) | "
             f"{s['read_image_cold_Bps'] / MB:.0f} MB/s |")
if "olmo" in res and "write_s" in res["olmo"]:
    o = res["olmo"]
    L.append(f"| OLMo-1B SOAP (full state, in files of <= {o['slice_gib']:g} GiB) | {gb(o['file_bytes'])} | {o['files']} | "
             f"{o['dd_write_Bps'] / MB:.0f} MB/s (before {o['dd_write_Bps_before_after'][0] / MB:.0f}, after "
             f"{o['dd_write_Bps_before_after'][-1] / MB:.0f}) | {o['write_rate_Bps'] / MB:.0f} MB/s ({o['write_s']:.1f} s) | "
             f"**{o['write_over_dd']:.2f}** | {o['write_image_s'] + o['fsync_s']:.1f} s | {o['commit_rest_s']:.1f} s | "
             f"{o.get('dd_read_Bps', 0) / MB:.0f} MB/s | {o['read_rate_Bps'] / MB:.0f} MB/s ({o['verify_s']:.1f} + {o['read_image_s']:.1f} s) | "
             f"{o['read_image_cold_rate_Bps'] / MB:.0f} MB/s |")
    L.append("")
    L.append(f"OLMo-1B SOAP state: params {gb(o['param_bytes'])} + optimizer state {gb(o['optimizer_state_bytes'])} "
             f"({o['buffers']} buffers, {o['pieces']} pieces); dd wrote {gb(o['dd_bytes'])}. file_xxh3 alone: "
             f"{o['hash_hot_rate_Bps'] / MB:.0f} MB/s from the page cache ({100 * o['hash_hot_cached_fraction']:.0f} % of the "
             f"file cached), {o['hash_cold_rate_Bps'] / MB:.0f} MB/s from disk.")
elif "olmo" in res:
    L.append(f"\nOLMo-1B: skipped ({res['olmo'].get('skipped')}).")
if "small" in res:
    s = res["small"]
    L.append(f"\nbench-small SOAP state: params {gb(s['param_bytes'])} + optimizer state {gb(s['optimizer_state_bytes'])}; "
             f"file_xxh3 alone {s['hash_hot_Bps'] / MB:.0f} MB/s from the page cache, {s['hash_cold_Bps'] / MB:.0f} MB/s from disk.")
    if "copy_into_image" in s:
        c = s["copy_into_image"]
        L.append(f"Copying this state into a laid-out image (Checkpointer::capture's memcpy, modelled): {c['copy_1thread_s']:.3f} s on one "
                 f"thread, {c['copy_parallel_s']:.3f} s on {c['threads']} threads; {c['copy_first_s']:.3f} s when the image is "
                 f"allocated first (the first save).")
L.append("\n## Training bench-small SOAP (native mode): how long the step is held\n")
t = res["train"]
L.append(f"`{t['config']}`, {t['steps']} steps, `checkpoint.every={t['every']}`, {t['data']}.\n")
L.append("| round | checkpoint.async | run's CPU share | median step | checkpoint step | checkpoint_s (step held) | next step (copy beside its forward) | checkpoint_write_s | checkpoint_bytes |")
L.append("|---|---|---|---|---|---|---|---|---|")
for d in t["runs"]:
    for i, c in enumerate(d["checkpoints"]):
        w = d["writes"][i] if i < len(d["writes"]) else None
        L.append(f"| {d['round']} | {'true' if d['async'] else 'false'} | {d['cpu_share']} | {d['median_step_s']:.2f} s | {c['step']} | "
                 f"{c['checkpoint_s']:.3f} s | {c['next_step_s']:.2f} s" + (f" (copy {c['copy_s']:.3f} s)" if c["copy_s"] else "") + " | "
                 + (f"{w['checkpoint_write_s']:.3f} s (reported at step {w['reported_at_step']}) | {w['checkpoint_bytes']} |" if w else
                    "(finished after the last metrics row) | |"))
if t.get("async_hold_over_sync_write_after_first") is not None:
    L.append(f"\nMedian synchronous write (checkpoint_write_s with checkpoint.async=false): {t['sync_write_s_median']:.3f} s "
             f"(the step was held {t['sync_hold_s_median']:.3f} s: write plus the copy into the image). "
             f"With checkpoint.async=true the step was held {t['async_hold_s_later_median']:.3f} s (median of the checkpoints after "
             f"the first) = **{t['async_hold_over_sync_write_after_first']:.3f}** of the synchronous write (target <= 0.10; per round "
             f"{t['async_hold_over_sync_write_after_first_per_round']}); the first checkpoint of a run, which also allocates "
             f"the image, held it {', '.join(f'{x:.3f}' for x in t['async_hold_s_first'])} s "
             f"({', '.join(f'{x:.2f}' for x in t['async_hold_over_sync_write_first'])} of the synchronous write).")
if t.get("async_copy_s_median") is not None:
    L.append(f"\nThe async copy (checkpoint_copy_s, on the staging lane beside the next step's forward) took "
             f"{t['async_copy_s_median']:.3f} s; the step that carried it took {t['async_next_step_s_median']:.2f} s, the "
             f"same step of the synchronous runs {t['sync_next_step_s_median']:.2f} s (medians of the checkpoints after the "
             f"first; that step is also a refresh step of this config, slow in both; compare within a round, the machine is shared).")
L.append("\n## Resume\n")
L.append("`--resume latest` of each run with `train.steps` one more and `checkpoint.enabled=false`, page cache dropped first; times from `strace -tt` of the file opens (see the script's header).\n")
L.append("| round | checkpoint of | restore (manifest to loaded) | verify_files part | read_image + load | process start to restored | whole resume process (1 step) |")
L.append("|---|---|---|---|---|---|---|")
for d in t["runs"]:
    r = d.get("resume")
    if r:
        f = lambda k: f"{r[k]:.3f} s" if k in r else "?"
        L.append(f"| {d['round']} | async={'true' if d['async'] else 'false'} run | {f('restore_s')} | {f('verify_files_s')} | "
                 f"{f('read_and_load_s')} | {f('process_start_to_restored_s')} | {r['wall_s']:.2f} s |")
drops = sorted({d["resume"]["drop_caches"] for d in t["runs"] if "resume" in d})
L.append(f"\nPage cache dropped before each resume: {', '.join(drops)}.")
ph = [x for x in recs if x["bench"] == "phase"]
if ph:
    L.append("\nLoad average (1, 5, 15 min) as each phase started: " + "; ".join(f"{x['what']} {' '.join(x['loadavg'].split()[:3])}" for x in ph)
             + f"; at the end {' '.join(res['loadavg_end'].split()[:3])}.")
with open(os.path.join(outdir, "summary.md"), "w") as f:
    f.write("\n".join(L) + "\n")
print("\n".join(L))
EOF
rc=$?
# Raw outputs: keep the small ones (bench JSON, dd log, strace, logs), drop checkpoints and runs.
rm -rf "$WORK/ck-small" "$WORK/dd.bin"
[ "${CKBENCH_KEEP:-0}" = 1 ] || rm -rf "$WORK"/train-r*-async-*/checkpoints
log "summary: $OUTDIR/summary.json, $OUTDIR/summary.md; raw: $WORK"
exit $rc
