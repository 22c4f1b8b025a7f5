#!/usr/bin/env bash
# Coherence on real hosts over the scaled link (issue 31): bench-small SOAP, asteria mode with its
# defaults (staggered refreshes), 2 hosts x 1 rank of scripts/cluster/cluster.sh, fsdp hybrid
# (the optimizer state replicated across the hosts), runtime.threads=1 (a core per host), the
# link shaped to bench/results/multinode/summary.json's rate (bench/multinode.sh's link model).
#   (a) STEPS steps (default 400) at runtime.coherence.staleness S = 1, 2, 5 without a tolerance
#       (tolerance=0) and S = 5 with its default tolerance: wall-clock, mean step, the comm lane's
#       time in the syncs, inter-node bytes, eval loss (every 50 steps) against wall-clock (plot);
#   (b) 2 hosts x 2 ranks, fsdp none, SHORT steps (default 30): hierarchical against flat
#       shipping, inter-node bytes and step time.
#   bench/multinode_coherence.sh [STEPS] [SHORT]
# Writes bench/results/multinode-coherence/summary.md, summary.json and eval_loss_wallclock.png;
# raw runs under runs/bench/multinode-coherence/ (gitignored; ASTERIA_BENCH_REUSE=1 keeps
# finished runs).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
STEPS=${1:-400}
SHORT=${2:-30}
OUT=bench/results/multinode-coherence
RAW=$ROOT/${ASTERIA_BENCH_RAW:-runs/bench/multinode-coherence}
WORK=$(mktemp -d /tmp/asteria-mncoh.XXXXXX)
export ASTERIA_CLUSTER_DIR=$WORK/cluster ASTERIA_CLUSTER_PREFIX=mc$(($$ % 100000))
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
trap 'scripts/cluster/cluster.sh down >/dev/null 2>&1; rm -rf "$WORK"' EXIT
log() { echo "[multinode-coherence] $*" >&2; }
cmake --build build -j2 --target asteria-train >/dev/null
scripts/prepare_data.sh 4096 >/dev/null
RATE_MBIT=$(/usr/bin/python3 -c "import json; print(round(json.load(open('bench/results/multinode/summary.json'))['rate_mbit']))")
mkdir -p "$OUT" "$RAW"
run() {  # NAME HOSTS RANKS FSDP STEPS [SETS...]
  local name=$1 hosts=$2 ranks=$3 fsdp=$4 steps=$5
  shift 5
  if [[ ${ASTERIA_BENCH_REUSE:-0} == 1 && -f $RAW/$name/metrics.jsonl ]] && [[ $(wc -l <"$RAW/$name/metrics.jsonl") -ge $steps ]]; then
    log "$name: kept"
    return 0
  fi
  local sets=(--set "data.train=$ROOT/data/generated/tok4096/train.bin" --set "data.eval=$ROOT/data/generated/tok4096/val.bin"
              --set "train.steps=$steps" --set "train.micro_batch=$((8 / ranks))" --set runtime.mode=asteria
              --set "distributed.fsdp=$fsdp" --set runtime.threads=1 --set checkpoint.enabled=false
              --set "run.dir=$RAW/$name" --set run.overwrite=true)
  local s
  for s in "$@"; do sets+=(--set "$s"); done
  log "$name: $hosts, fsdp $fsdp, $steps steps $* (load $(cut -d' ' -f1-3 /proc/loadavg))"
  /usr/bin/time -f '%e' -o "$RAW/$name.time" scripts/cluster/cluster.sh mpirun --host "$hosts" "$ROOT/build/bin/asteria-train" \
    --config "$ROOT/configs/bench-small-soap.yaml" "${sets[@]}" >"$RAW/$name.log" 2>&1 ||
    { tail -5 "$RAW/$name.log" >&2; return 1; }
}
scripts/cluster/cluster.sh up 2 --rate "${RATE_MBIT}mbit" >/dev/null
run s1 node1:1,node2:1 2 hybrid "$STEPS" runtime.coherence.staleness=1
run s5-default node1:1,node2:1 2 hybrid "$STEPS" runtime.coherence.staleness=5
run s5 node1:1,node2:1 2 hybrid "$STEPS" runtime.coherence.staleness=5 runtime.coherence.tolerance=0
run s2 node1:1,node2:1 2 hybrid "$STEPS" runtime.coherence.staleness=2 runtime.coherence.tolerance=0
run hierarchical node1:2,node2:2 4 none "$SHORT" data.eval=
run flat node1:2,node2:2 4 none "$SHORT" data.eval= runtime.coherence.hierarchical=false

/usr/bin/python3 - "$RAW" "$OUT" "$STEPS" "$SHORT" "$RATE_MBIT" <<'PY'
import json, os, statistics, sys, time
raw, out, steps, short, rate = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
def load(name):
    p = os.path.join(raw, name, "metrics.jsonl")
    return [json.loads(l) for l in open(p)] if os.path.exists(p) else []
def info(name, skip=4):
    recs = load(name)
    if not recs:
        return None
    ev = [(r["elapsed_s"], r["step"], r["eval_loss"]) for r in recs if "eval_loss" in r]
    body = recs[skip:]
    return {"steps": len(recs), "wallclock_s": recs[-1]["elapsed_s"],
            "mean_step_s": statistics.mean(r["step_time_s"] for r in body),
            "coherence_s": statistics.mean(r.get("coherence_s", 0) for r in body),
            "comm_wait_s": statistics.mean(r.get("comm_wait_s", 0) for r in body),
            "bytes_inter": sum(r.get("coherence_bytes_inter", 0) for r in recs),
            "shipped": sum(r.get("coherence_shipped_blocks", 0) for r in recs),
            "skipped": sum(r.get("coherence_skipped_versions", 0) for r in recs),
            "final_eval_loss": ev[-1][2] if ev else None, "eval": ev, "losses": [r["loss"] for r in recs]}
runs = {n: info(n) for n in ["s1", "s2", "s5", "s5-default", "hierarchical", "flat"]}
b = runs["s1"]
labels = {"s1": "S = 1", "s2": "S = 2", "s5": "S = 5, no tolerance", "s5-default": "S = 5 (default tolerance)"}
L = ["# Coherence on two hosts over the scaled link (%s)" % time.strftime("%Y-%m-%d %H:%M"), "",
     "`bench/multinode_coherence.sh %d %d`: bench-small SOAP, asteria mode (its defaults: staggered refreshes), 2 hosts x 1 rank" % (steps, short),
     "of scripts/cluster/cluster.sh, fsdp hybrid (state replicated across the hosts), runtime.threads=1, each host's link",
     "shaped to %s Mbit/s (bench/multinode.sh's link model), the tok4096 corpus; steps 5.. for the means." % rate, "",
     "| run | wall-clock (s) | vs S = 1 | mean step (s) | comm lane in syncs (s/step) | compute waiting on comm (s/step) | versions shipped / dropped | inter-node bytes | vs S = 1 | final eval loss | vs S = 1 |",
     "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
for n in ["s1", "s2", "s5", "s5-default"]:
    r = runs[n]
    if not r:
        continue
    dev = 100 * (r["final_eval_loss"] - b["final_eval_loss"]) / b["final_eval_loss"]
    L.append("| %s | %.0f | %.3f | %.3f | %.3f | %.3f | %d / %d | %.0f MB | %.3f | %.4f | %+.2f %% |" % (
        labels[n], r["wallclock_s"], r["wallclock_s"] / b["wallclock_s"], r["mean_step_s"], r["coherence_s"],
        r["comm_wait_s"], r["shipped"], r["skipped"], r["bytes_inter"] / 1e6, r["bytes_inter"] / b["bytes_inter"],
        r["final_eval_loss"], dev))
L += ["", "S = 1's comm lane spends %.3f s a step in the syncs, %.1f %% of its mean step (the share the target compares" % (
          b["coherence_s"], 100 * b["coherence_s"] / b["mean_step_s"]),
      "S = 5's saving with)."]
h, f = runs["hierarchical"], runs["flat"]
if h and f:
    L += ["", "## Hierarchical against flat (2 hosts x 2 ranks, fsdp none: every rank a replica)", "",
          "| scheme | steps | inter-node bytes | mean step (s) | losses |", "| --- | --- | --- | --- | --- |",
          "| hierarchical | %d | %.1f MB | %.3f | %s |" % (h["steps"], h["bytes_inter"] / 1e6, h["mean_step_s"],
                                                      "bit-identical to flat's" if h["losses"] == f["losses"] else "DIFFER"),
          "| flat | %d | %.1f MB | %.3f | |" % (f["steps"], f["bytes_inter"] / 1e6, f["mean_step_s"])]
open(os.path.join(out, "summary.md"), "w").write("\n".join(L) + "\n")
for r in runs.values():
    if r:
        del r["losses"]
json.dump({"steps": steps, "rate_mbit": float(rate), "runs": runs}, open(os.path.join(out, "summary.json"), "w"), indent=1)
print("\n".join(L))
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(6, 4))
for n in ["s1", "s2", "s5", "s5-default"]:
    r = runs[n]
    if r and r["eval"]:
        ax.plot([e[0] for e in r["eval"]], [e[2] for e in r["eval"]], marker="o", label=labels[n])
ax.set_xlabel("wall-clock (s)")
ax.set_ylabel("eval loss")
ax.set_title("bench-small SOAP on 2 hosts, %s Mbit/s links" % rate)
ax.legend()
fig.tight_layout()
fig.savefig(os.path.join(out, "eval_loss_wallclock.png"), dpi=120)
PY
