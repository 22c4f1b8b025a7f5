#!/usr/bin/env bash
# FSDP benchmark (issue 12 "Benchmarks"): bench-small AdamW and SOAP at W = 1, 2 and 4 ranks in
# each distributed.fsdp mode: step time, comm bytes per step (shard group / replicas), the comm
# lane's time in collectives against how long the compute lane waited for them (the overlap),
# per-rank peak memory, and the final losses of the modes against each other.
#
#   bench/fsdp.sh [--steps N] [--optims "adamw soap"] [--ranks "1 2 4"]
#   bench/fsdp.sh --summarize runs/bench-fsdp-<date>    # the summaries again from a run's raw outputs
#
# One command:
#   (a) builds asteria-train (-j2) if needed; prints OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE as
#       found (never sets them);
#   (b) writes random tokens for vocab 4096 as bench/checkpoint.sh makes them
#       (data/generated/bench/random-v4096-4M.u16) if the file is not there;
#   (c) for each optimizer (configs/bench-small-<optim>.yaml), W in RANKS and mode:
#         W = 1: none and full (one rank: no collective at all, the two are one code path; run
#                both as a check)
#         W = 2: none and full (hybrid with distributed.ranks_per_node=2 is one node of 2 ranks at
#                W = 2, i.e. full: not run)
#         W = 4: none, full and hybrid (distributed.ranks_per_node=2: 2 "nodes" x 2 ranks; the
#                shard group is the node, the replicas go across the nodes)
#       runs
#         mpirun --oversubscribe --bind-to none -np W -x OMP_NUM_THREADS=max(1, cores / W) \
#           build/bin/asteria-train --config configs/bench-small-<optim>.yaml \
#           --set data.train=<random tokens> --set data.eval= --set train.warmup_steps=0 \
#           --set train.steps=STEPS --set train.micro_batch=8/W --set checkpoint.enabled=false \
#           --set distributed.fsdp=<mode> [--set distributed.ranks_per_node=2] --set runtime.mode=native
#       (the configs' micro_batch is 8, so the global batch, 8 x 256 tokens, is the same at every
#       W; train.warmup_steps=0 because the configs' 40 warm-up steps exceed STEPS, which the
#       config check refuses; runtime.mode native: the figures of bench/results/fsdp are native's,
#       without the shadow pipeline and, in fsdp none and hybrid, the coherence of replicated SOAP
#       state). --bind-to none: Open MPI 4.1 binds each rank to one core when
#       np <= 2, which would put W = 1's two OpenMP threads on one core. The runs are sequential,
#       each under /usr/bin/time (wall, CPU) with the load average as it starts; a run that
#       fails is recorded with the tail of its output and the rest go on;
#   (d) from each run's metrics.jsonl (rank 0 writes it), steps after the first: median
#       step_time_s, the run's CPU share (CPU seconds / (wall x cores): others' load on this shared
#       machine shows there), comm_bytes per step (rank 0's, as a ring sends them), comm_s (the comm
#       lane's seconds in collectives, rank 0), comm_wait_s (the compute lane's wait for them,
#       rank 0), overlap = 1 - sum(comm_wait_s) / sum(comm_s); rank 0's optimizer state
#       (tier_bytes, all in the device tier); peak_rss_bytes of the last step, min and max over
#       the ranks; the loss after the last step, compared across the modes of
#       one W (flagged beyond 1e-4 relative) and against W = 1;
#   (e) writes bench/results/fsdp/summary.json and summary.md (summaries only; cost_model.md
#       there is bench/fsdp_cost_model.py's and is left alone).
# Raw outputs (each run's run.dir, its log and time file, raw.jsonl) stay under
# runs/bench-fsdp-<date>/ (gitignored). STEPS defaults to 6; about 10 minutes on 2 cores.
# The ranks share the machine's cores (4 ranks on 2 cores are oversubscribed), so step times are
# not a speed-up measurement: the figures that matter are the bytes, the overlap and the per-rank
# memory.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

STEPS=6
OPTIMS="adamw soap"
RANKS="1 2 4"
SUMMARIZE=""
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) STEPS=$2; shift 2 ;;
    --optims) OPTIMS=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --summarize) SUMMARIZE=$2; shift 2 ;;
    *) echo "usage: bench/fsdp.sh [--steps N] [--optims \"adamw soap\"] [--ranks \"1 2 4\"] | --summarize RAW_DIR" >&2; exit 2 ;;
  esac
done
[ "$STEPS" -ge 2 ] || { echo "bench/fsdp.sh: --steps must be >= 2 (the first step is not counted)" >&2; exit 2; }

PY=/usr/bin/python3
BUILD=${ASTERIA_BUILD_DIR:-build}
OUTDIR=bench/results/fsdp
CORES=$(nproc)
log() { echo "[fsdp] $*" >&2; }
if [ -n "$SUMMARIZE" ]; then
  RAW=$SUMMARIZE/raw.jsonl
  [ -s "$RAW" ] || { echo "bench/fsdp.sh: no $RAW" >&2; exit 2; }
else
  STAMP=$(date +%Y%m%d-%H%M%S)
  WORK=$ROOT/runs/bench-fsdp-$STAMP
  mkdir -p "$WORK" "$OUTDIR"
  RAW=$WORK/raw.jsonl
  : > "$RAW"
  log "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-(unset)} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE-(unset)} (as found; not changed)"
  log "raw outputs under $WORK"
  # mpirun as root
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

  # (a) build
  if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release > "$WORK/cmake.log" 2>&1 || { cat "$WORK/cmake.log" >&2; exit 1; }
  fi
  log "building asteria-train"
  cmake --build "$BUILD" -j2 --target asteria-train > "$WORK/build.log" 2>&1 || { tail -30 "$WORK/build.log" >&2; exit 1; }
  TRAIN=$ROOT/$BUILD/bin/asteria-train
  command -v mpirun > /dev/null || { log "mpirun not found (Debian: openmpi-bin)"; exit 1; }

  # (b) random tokens (as bench/checkpoint.sh and bench/throughput.sh make them)
  TOKENS=data/generated/bench/random-v4096-4M.u16
  if [ ! -s "$TOKENS" ]; then
    log "writing $TOKENS"
    mkdir -p "$(dirname "$TOKENS")"
    $PY -c "import numpy as np; np.random.default_rng(0).integers(0, 4096, size=4_000_000, dtype=np.uint16).tofile('$TOKENS')"
  fi

  # (c) the runs
  runs=()
  for o in $OPTIMS; do
    for w in $RANKS; do
      case $w in
        1|2) modes="none full" ;;
        *) modes="none full hybrid" ;;
      esac
      for m in $modes; do runs+=("$o:$w:$m"); done
    done
  done
  # The run's facts for the summary (which can be made again from raw.jsonl: --summarize).
  echo "{\"bench\": \"meta\", \"t_start\": $(date +%s), \"loadavg_start\": \"$(cat /proc/loadavg)\", \"steps\": $STEPS, \"cores\": $CORES, \"OPENBLAS_CORETYPE\": \"${OPENBLAS_CORETYPE-(unset)}\", \"OPENBLAS_L2_SIZE\": \"${OPENBLAS_L2_SIZE-(unset)}\", \"commit\": \"$(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD -- src apps bench/fsdp.sh 2>/dev/null || echo +changes)\"}" >> "$RAW"
  i=0
  for r in "${runs[@]}"; do
    i=$((i + 1))
    IFS=: read -r o w m <<< "$r"
    config=configs/bench-small-$o.yaml
    mb=$(sed -n 's/^  micro_batch: *\([0-9]*\).*/\1/p' "$config" | head -1)
    if [ -z "$mb" ] || [ $((mb % w)) != 0 ]; then
      log "$config: micro_batch '$mb' does not divide by $w; skipped"
      echo "{\"bench\": \"run\", \"optim\": \"$o\", \"world\": $w, \"fsdp\": \"$m\", \"rc\": null, \"error\": \"micro_batch $mb does not divide by $w\"}" >> "$RAW"
      continue
    fi
    threads=$((CORES / w)); [ "$threads" -ge 1 ] || threads=1
    name=$o-w$w-$m
    dir=$WORK/$name
    sets=(--set data.train="$ROOT/$TOKENS" --set data.eval= --set train.warmup_steps=0 --set train.steps="$STEPS"
          --set train.micro_batch=$((mb / w)) --set checkpoint.enabled=false --set distributed.fsdp="$m" --set runtime.mode=native
          --set run.dir="$dir" --set run.overwrite=true)
    [ "$m" = hybrid ] && sets+=(--set distributed.ranks_per_node=2)
    load=$(cat /proc/loadavg)
    log "[$i/${#runs[@]}] $o W=$w fsdp=$m: micro_batch $((mb / w)), OMP_NUM_THREADS=$threads, $STEPS steps (load $(echo "$load" | cut -d' ' -f1-3))"
    t0=$(date +%s)
    /usr/bin/time -f '%e %U %S' -o "$WORK/$name.time" \
      mpirun --oversubscribe --bind-to none -np "$w" -x OMP_NUM_THREADS="$threads" \
      "$TRAIN" --config "$config" "${sets[@]}" > "$WORK/$name.log" 2>&1
    rc=$?
    read -r wall user sys < <(tail -1 "$WORK/$name.time")
    echo "$o $w $m $threads $((mb / w)) $rc ${wall:-0} ${user:-0} ${sys:-0}" | $PY -c "
import json, sys
o, w, m, th, mb, rc, wall, user, sys_ = sys.stdin.read().split()
rec = {'bench': 'run', 'optim': o, 'world': int(w), 'fsdp': m, 'omp_threads': int(th), 'micro_batch': int(mb), 'rc': int(rc),
       'wall_s': float(wall), 'cpu_s': round(float(user) + float(sys_), 2), 'loadavg': sys.argv[1],
       'dir': sys.argv[2], 'log': sys.argv[3], 'config': sys.argv[4]}
if int(rc) != 0:
    rec['error'] = open(sys.argv[3], errors='replace').read()[-3000:]
print(json.dumps(rec))" "$load" "$dir" "$WORK/$name.log" "$config" >> "$RAW" || { log "could not record the run in $RAW"; exit 1; }
    if [ "$rc" != 0 ]; then
      log "  FAILED (exit $rc); its output ends:"
      tail -15 "$WORK/$name.log" | tr '\r' '\n' | tail -15 >&2
    else
      log "  done in $(( $(date +%s) - t0 )) s: $(tr '\r' '\n' < "$WORK/$name.log" | grep '^done:' | tail -1)"
    fi
  done
  echo "{\"bench\": \"end\", \"t_end\": $(date +%s), \"loadavg_end\": \"$(cat /proc/loadavg)\"}" >> "$RAW"
fi

# (d, e) summaries
OUTDIR=$OUTDIR $PY - "$RAW" <<'EOF'
import json, os, statistics, sys, time
E = os.environ
allrecs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
meta = next(x for x in allrecs if x.get("bench") == "meta")
end = next((x for x in allrecs if x.get("bench") == "end"), {})
recs = [x for x in allrecs if x.get("bench") == "run"]
outdir = E["OUTDIR"]
med = statistics.median
TOL = 1e-4

def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"

def mem_gib():
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None

runs = []
params = None
for r in recs:
    d = {k: r[k] for k in ("optim", "world", "fsdp", "omp_threads", "micro_batch", "rc", "wall_s", "cpu_s", "loadavg")
         if k in r}
    d["loadavg"] = " ".join(str(r.get("loadavg", "")).split()[:3])
    if r.get("rc") != 0:
        d["error"] = r.get("error", "")
        runs.append(d)
        continue
    rows = [json.loads(l) for l in open(os.path.join(r["dir"], "metrics.jsonl")) if l.strip()]
    info = json.load(open(os.path.join(r["dir"], "run_info.json")))
    params = info["params"]
    d["tokens_per_step"] = info["tokens_per_step"]
    d["steps"] = len(rows)
    later = [x for x in rows if x["step"] > 1]
    d["step_time_s_median"] = med(x["step_time_s"] for x in later)
    d["step_time_s_first"] = rows[0]["step_time_s"]
    d["cpu_share"] = round(r["cpu_s"] / (r["wall_s"] * meta["cores"]), 2) if r["wall_s"] else None
    if "comm_bytes" in rows[0]:
        g = sorted({x["comm_bytes"]["shard_group"] for x in later})
        p = sorted({x["comm_bytes"]["replicas"] for x in later})
        d["comm_bytes"] = {"shard_group": g[0] if len(g) == 1 else g, "replicas": p[0] if len(p) == 1 else p}
        d["comm_bytes_same_every_step"] = len(g) == 1 and len(p) == 1
        cs = sum(x["comm_s"] for x in later)
        cw = sum(x["comm_wait_s"] for x in later)
        d["comm_s_median"] = med(x["comm_s"] for x in later)
        d["comm_wait_s_median"] = med(x["comm_wait_s"] for x in later)
        d["overlap"] = 1 - cw / cs if cs > 0 else None
    d["optimizer_state_bytes_rank0"] = sum(rows[-1]["tier_bytes"].values())
    rss = rows[-1]["peak_rss_bytes"]
    d["peak_rss_bytes"] = {"min": min(rss), "max": max(rss), "per_rank": rss}
    d["final_loss"] = rows[-1]["loss"]
    d["losses"] = [x["loss"] for x in rows]
    runs.append(d)

# Losses: the modes of one W against each other, and against W = 1.
checks = []
for o in sorted({d["optim"] for d in runs}):
    ok = [d for d in runs if d["optim"] == o and "final_loss" in d]
    ref1 = next((d for d in ok if d["world"] == 1 and d["fsdp"] == "none"), None)
    for w in sorted({d["world"] for d in ok}):
        at = [d for d in ok if d["world"] == w]
        ls = [d["final_loss"] for d in at]
        spread = (max(ls) - min(ls)) / abs(min(ls)) if len(ls) > 1 else 0.0
        checks.append({"optim": o, "world": w, "modes": [d["fsdp"] for d in at], "final_losses": ls,
                       "max_rel_diff": spread, "flagged": spread > TOL})
    for d in ok:
        if ref1:
            d["final_loss_rel_diff_vs_w1"] = abs(d["final_loss"] - ref1["final_loss"]) / abs(ref1["final_loss"])

res = {
    "date": time.strftime("%Y-%m-%d %H:%M", time.localtime(meta["t_start"])),
    "commit": meta["commit"],
    "cpu": cpu_model(), "nproc": meta["cores"], "mem_gib": mem_gib(),
    "OPENBLAS_CORETYPE": meta["OPENBLAS_CORETYPE"], "OPENBLAS_L2_SIZE": meta["OPENBLAS_L2_SIZE"],
    "loadavg_start": meta["loadavg_start"].strip(), "loadavg_end": end.get("loadavg_end", "?").strip(),
    "total_wall_s": end["t_end"] - meta["t_start"] if end else None,
    "steps": meta["steps"], "medians_over": "steps 2..N (the first step is not counted)",
    "data": "random tokens, vocab 4096 (data/generated/bench/random-v4096-4M.u16)",
    "global_batch": "the configs' micro_batch 8 x seq 256 = 2048 tokens per step at every W (train.micro_batch = 8 / W)",
    "launch": "mpirun --oversubscribe --bind-to none -np W -x OMP_NUM_THREADS=max(1, cores / W)",
    "params": params,
    "loss_tolerance_rel": TOL,
    "notes": [
        "The ranks share the machine's cores (W = 4 on 2 cores is oversubscribed): step times are not a speed-up measurement; the figures that matter are the bytes, the overlap and the per-rank memory.",
        "comm_bytes, comm_s and comm_wait_s are rank 0's (metrics.jsonl is rank 0's); bytes are what rank 0 sends as a ring sends them.",
        "overlap = 1 - sum(comm_wait_s) / sum(comm_s) over steps 2..N.",
        "peak_rss_bytes: each rank's peak resident memory (getrusage) after the last step; min and max over the ranks. optimizer_state_bytes_rank0: rank 0's optimizer state (tier_bytes summed over the tiers; all of it in the device tier here).",
        "Sharded (full, hybrid): a rank keeps its shards of the parameters, gradients and optimizer state, and whole layers only in a few buffers in flight (prefetch + 1 parameter and 2 gradient buffers of the largest layer: here the embedding, 4096 x 256, a quarter of the model). A rank's memory also falls with W because its micro-batch (train.micro_batch = 8 / W), and with it its activations, does.",
        "cpu_share = the run's CPU seconds (all ranks) / (wall x cores): well below 1 when others' processes took the cores of this shared machine.",
        "hybrid runs at W = 4 only (distributed.ranks_per_node = 2): at W = 2 it is one node of 2 ranks, i.e. full. W = 1: none and full are one code path (no collective).",
    ],
    "loss_checks": checks,
    "runs": runs,
}
with open(os.path.join(outdir, "summary.json"), "w") as f:
    json.dump(res, f, indent=2)
    f.write("\n")

MB = 1e6
L = []
L.append(f"# FSDP benchmark ({res['date']})\n")
L.append(f"Regenerate: `bench/fsdp.sh` (see its header; raw outputs stay under `runs/bench-fsdp-<date>/`). Commit {res['commit']}. "
         f"Machine: {res['cpu']}, {res['nproc']} CPUs, {res['mem_gib']} GiB; shared, load average {' '.join(res['loadavg_start'].split()[:3])} "
         f"at the start, {' '.join(res['loadavg_end'].split()[:3])} at the end; {res['total_wall_s']} s in all (runs one after another). "
         f"OPENBLAS_CORETYPE={res['OPENBLAS_CORETYPE']}, OPENBLAS_L2_SIZE={res['OPENBLAS_L2_SIZE']} (as found).\n")
L.append(f"bench-small (configs/bench-small-adamw.yaml, configs/bench-small-soap.yaml; {params} parameters, "
         f"{params * 4 / MB:.1f} MB in fp32), {res['data']}, {res['steps']} steps, runtime.mode=native, checkpoint.enabled=false; "
         f"{res['global_batch']}. Launch: `{res['launch']}` (`--bind-to none`: Open MPI 4.1 binds a rank to one core when "
         f"np <= 2, which would put W = 1's two threads on one core). Medians over {res['medians_over']}.\n")
L.append(f"**The machine has {res['nproc']} cores: the ranks share them (W = 4 is oversubscribed), so the step times below are "
         "not a speed-up measurement. The figures that matter are the bytes, the overlap and the per-rank memory.**\n")
L.append("| optimizer | W | fsdp | threads/rank | median step | CPU share | comm bytes/step: shard group | replicas | comm_s (median) | comm_wait_s (median) | overlap | optimizer state, rank 0 | peak RSS/rank min - max | final loss | vs W=1 (rel) | load at start |")
L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
mib = lambda b: f"{b / 2**20:.0f} MiB"
for d in runs:
    head = f"| {d['optim']} | {d['world']} | {d['fsdp']}" + (" (rpn 2)" if d["fsdp"] == "hybrid" else "")
    if "error" in d:
        L.append(head + f" | {d.get('omp_threads', '')} | **failed (exit {d.get('rc')})**, see below | | | | | | | | | | | {d.get('loadavg', '')} |")
        continue
    if "comm_bytes" in d:
        cb = d["comm_bytes"]
        fmt = lambda v: (f"{v / MB:.2f} MB ({v / (4 * params):.3f} x params)" if isinstance(v, (int, float)) else f"varies {v}")
        ov = "-" if d["overlap"] is None else f"{d['overlap']:.2f}"
        comm = (f"{fmt(cb['shard_group'])} | {fmt(cb['replicas'])} | {d['comm_s_median']:.3f} s | {d['comm_wait_s_median']:.3f} s | "
                f"{ov}")
    else:
        comm = "0 (one rank) | 0 | - | - | -"
    rel = d.get("final_loss_rel_diff_vs_w1")
    L.append(head + f" | {d['omp_threads']} | {d['step_time_s_median']:.2f} s | {d['cpu_share']} | {comm} | "
             f"{mib(d['optimizer_state_bytes_rank0'])} | {mib(d['peak_rss_bytes']['min'])} - {mib(d['peak_rss_bytes']['max'])} | {d['final_loss']:.6f} | "
             f"{'' if rel is None else f'{rel:.1e}'} | {d['loadavg']} |")
L.append("")
L.append("comm bytes are rank 0's per step, as a ring sends them; \"x params\" divides by the fp32 parameter bytes (4 x params). "
         "In full all ranks are one shard group; in hybrid the shard group is the node (intra-node) and the replicas go across "
         "the nodes (inter-node); in none the replicas are all ranks. comm_s: the comm lane's seconds in collectives; "
         "comm_wait_s: the compute lane's wait for them (a forward or backward for its gather, grad_norm for the gradient reduction); "
         "overlap = 1 - sum(comm_wait_s) / sum(comm_s) over the counted steps (rank 0's figures; a collective's time includes "
         "waiting for the other ranks to reach it, and the wait can exceed it, which makes the overlap negative). "
         "CPU share: the run's CPU seconds / (wall x cores).\n")
L.append("Memory: sharded, a rank keeps its shards of the parameters, gradients and optimizer state (its column: rank 0's "
         "part of the state), and whole layers only in a few buffers in flight: prefetch + 1 parameter and 2 gradient "
         "buffers of the largest layer (here the embedding, a quarter of bench-small). A rank's peak RSS also falls with W "
         "because its micro-batch (8 / W), and with it its activations, does; compare the modes at one W for what sharding "
         "saves.\n")
L.append("## Final losses across the modes of one W\n")
L.append("The modes of one W sum the same gradients in the same order per rank, so their losses should agree closely (a "
         "difference of 0 is the same double). Across W the per-rank micro-batches and the order of the sums change: "
         "AdamW stays close; SOAP's first factors are rank-deficient, so its eigenbasis follows the rounding of the "
         "gradient sum (docs/training.md, \"Several ranks\"), and its losses across W differ more (the table's \"vs W=1\").\n")
L.append(f"| optimizer | W | modes | final losses | max relative difference | beyond {TOL:g}? |")
L.append("|---|---|---|---|---|---|")
for c in checks:
    L.append(f"| {c['optim']} | {c['world']} | {', '.join(c['modes'])} | {', '.join(f'{x:.7f}' for x in c['final_losses'])} | "
             f"{c['max_rel_diff']:.1e} | {'**yes**' if c['flagged'] else 'no'} |")
fails = [d for d in runs if "error" in d]
if fails:
    L.append("\n## Failed runs\n")
    for d in fails:
        L.append(f"### {d['optim']} W={d['world']} fsdp={d['fsdp']} (exit {d.get('rc')})\n")
        L.append("```\n" + d["error"].replace("\r", "\n").strip()[-2000:] + "\n```\n")
with open(os.path.join(outdir, "summary.md"), "w") as f:
    f.write("\n".join(L) + "\n")
print("\n".join(L))
EOF
rc=$?
log "summary: $OUTDIR/summary.json, $OUTDIR/summary.md; raw: $(dirname "$RAW")"
exit $rc
