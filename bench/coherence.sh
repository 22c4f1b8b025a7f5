#!/usr/bin/env bash
# Coherence benchmark (issue 13): bench-small SOAP in asteria mode with replicated optimizer
# state, under mpirun on this machine (ranks oversubscribed: the figures are bytes and losses,
# not speed).
#   (a) fsdp hybrid, W = 4 as 2 "nodes" x 2 ranks (distributed.ranks_per_node=2), STEPS steps
#       (default 400) at runtime.coherence.staleness S = 1, 2, 5 (tolerance off) and S = 5 with
#       tolerance TAU (default 0.3): the run's total coherence_bytes_inter and final eval loss,
#       against S = 1's (targets: S = 5 ships <= 1/4 of S = 1's inter-node bytes, final eval loss
#       within 0.5 %);
#   (b) fsdp none, W = 4 (2 x 2), SHORT steps (default 40): hierarchical against flat shipping,
#       inter-node bytes (target: hierarchical <= 1 / ranks_per_node of flat's) and the same bits.
#   bench/coherence.sh [STEPS] [TAU] [SHORT]
# Every run pins runtime.stagger=false (the reference refresh schedule; asteria mode's default is
# now staggered), so that all runs share one schedule and the figures stay comparable with the
# runs made before that default changed.
# ASTERIA_BENCH_REUSE=1 keeps finished runs (a run of its full length in the raw folder), so an
# interrupted benchmark goes on where it stopped; ASTERIA_BENCH_ONLY="hybrid-s1 ..." runs only
# those (the summary covers every run in the raw folder). Raw runs go under runs/bench/coherence/
# (gitignored); bench/results/coherence/ gets summary.md, summary.json and the plots
# (bench/plot_coherence.py: eval loss and cumulative inter-node bytes against step).
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-400}
TAU=${2:-0.3}
SHORT=${3:-40}
OUT=bench/results/coherence
RAW=${ASTERIA_BENCH_RAW:-runs/bench/coherence}
BUILD=${ASTERIA_BUILD_DIR:-build}
scripts/setup.sh >/dev/null
cmake --build "$BUILD" -j2 --target asteria-train >/dev/null
scripts/prepare_data.sh 4096 >/dev/null
mkdir -p "$OUT" "$RAW"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-(unset)} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE-(unset)} (as found)" >&2
run() {  # NAME STEPS [SETS...]; ASTERIA_BENCH_ONLY="name ..." runs only those
  local name=$1 steps=$2
  shift 2
  [[ -z ${ASTERIA_BENCH_ONLY:-} || " $ASTERIA_BENCH_ONLY " == *" $name "* ]] || return 0
  if [[ ${ASTERIA_BENCH_REUSE:-0} == 1 && -f $RAW/$name/metrics.jsonl ]] &&
     [[ $(wc -l < "$RAW/$name/metrics.jsonl") -ge $steps ]]; then
    echo "[coherence] $name: kept" >&2
    return 0
  fi
  local sets=(--set run.dir="$RAW/$name" --set run.overwrite=true --set checkpoint.enabled=false
              --set train.steps="$steps" --set train.micro_batch=2 --set runtime.mode=asteria
              --set distributed.ranks_per_node=2 --set runtime.stagger=false)
  for s in "$@"; do sets+=(--set "$s"); done
  echo "[coherence] $name: $steps steps (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  /usr/bin/time -f '%e' -o "$RAW/$name.time" \
    mpirun --oversubscribe --bind-to none -np 4 -x OMP_NUM_THREADS=1 \
    "$BUILD/bin/asteria-train" --config configs/bench-small-soap.yaml "${sets[@]}" > "$RAW/$name.log" 2>&1 ||
    { echo "[coherence] $name FAILED:" >&2; tail -5 "$RAW/$name.log" >&2; return 1; }
}
# The targets' runs first (S = 1 against S = 5, hierarchical against flat), then the others.
run hybrid-s1 "$STEPS" distributed.fsdp=hybrid
run hybrid-s5 "$STEPS" distributed.fsdp=hybrid runtime.coherence.staleness=5 runtime.coherence.tolerance=0
run none-hierarchical "$SHORT" distributed.fsdp=none
run none-flat "$SHORT" distributed.fsdp=none runtime.coherence.hierarchical=false
run hybrid-s5-tau "$STEPS" distributed.fsdp=hybrid runtime.coherence.staleness=5 runtime.coherence.tolerance="$TAU"
run hybrid-s2 "$STEPS" distributed.fsdp=hybrid runtime.coherence.staleness=2 runtime.coherence.tolerance=0
/usr/bin/python3 - "$RAW" "$OUT" "$STEPS" "$TAU" "$SHORT" <<'PY'
import json, os, sys, time
raw, out, steps, tau, short = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
def lines(run):
    p = os.path.join(raw, run, "metrics.jsonl")
    return [json.loads(l) for l in open(p)] if os.path.exists(p) else []
def total(recs, key):
    return sum(r.get(key, 0) for r in recs)
def final_eval(recs):
    ev = [r["eval_loss"] for r in recs if "eval_loss" in r]
    return ev[-1] if ev else None
runs = {}
for name in ["none-hierarchical", "none-flat", "hybrid-s1", "hybrid-s2", "hybrid-s5", "hybrid-s5-tau"]:
    recs = lines(name)
    if not recs:
        continue
    runs[name] = {"steps": len(recs), "bytes_inter": total(recs, "coherence_bytes_inter"),
                  "bytes_intra": total(recs, "coherence_bytes_intra"),
                  "shipped": total(recs, "coherence_shipped_blocks"), "skipped": total(recs, "coherence_skipped_versions"),
                  "final_eval_loss": final_eval(recs), "final_loss": recs[-1]["loss"],
                  "losses": [r["loss"] for r in recs],
                  "staleness_max_versions": max(r.get("staleness_max", {}).get("versions", 0) for r in recs),
                  "staleness_mean_steps": sum(r.get("staleness_mean", {}).get("steps", 0) for r in recs) / len(recs)}
L = ["# Coherence benchmark (%s)" % time.strftime("%Y-%m-%d %H:%M"), "",
     "Regenerate: `bench/coherence.sh %d %s %d` (raw runs under runs/bench/coherence/). bench-small SOAP "
     "(configs/bench-small-soap.yaml) in asteria mode, 4 ranks under mpirun on this 2-core machine as 2 \"nodes\" x 2 "
     "(distributed.ranks_per_node=2), micro-batch 2 per rank (the config's global batch of 8), runtime.stagger=false "
         "(every block refreshes at the same steps, as in native mode)." % (steps, tau, short), ""]
b = runs.get("hybrid-s1")
L += ["## Staleness (fsdp hybrid: sharded in a node, replicated across the 2 nodes)", "",
      "| run | steps | inter-node bytes | vs S=1 | intra-node bytes | versions shipped | skipped | max versions behind | mean steps behind | final eval loss | vs S=1 |",
      "|---|---|---|---|---|---|---|---|---|---|---|"]
for name in ["hybrid-s1", "hybrid-s2", "hybrid-s5", "hybrid-s5-tau"]:
    r = runs.get(name)
    if not r:
        continue
    ratio = "%.3f" % (r["bytes_inter"] / b["bytes_inter"]) if b and b["bytes_inter"] else "-"
    ev = "%.4f" % r["final_eval_loss"] if r["final_eval_loss"] is not None else "-"
    dev = "%+.3f %%" % (100 * (r["final_eval_loss"] - b["final_eval_loss"]) / b["final_eval_loss"]) \
        if b and r["final_eval_loss"] is not None and b["final_eval_loss"] else "-"
    label = name.replace("hybrid-", "").replace("s5-tau", "S=5, tau=" + tau).replace("s", "S=")
    L.append("| %s | %d | %.1f MB | %s | %.1f MB | %d | %d | %d | %.1f | %s | %s |" % (
        label, r["steps"], r["bytes_inter"] / 1e6, ratio, r["bytes_intra"] / 1e6, r["shipped"], r["skipped"],
        r["staleness_max_versions"], r["staleness_mean_steps"], ev, dev))
h, f = runs.get("none-hierarchical"), runs.get("none-flat")
if h and f:
    L += ["", "## Hierarchical against flat (fsdp none: every rank a replica, 2 per node)", "",
          "| scheme | steps | inter-node bytes | intra-node bytes | losses |", "|---|---|---|---|---|",
          "| hierarchical | %d | %.1f MB | %.1f MB | %s |" % (h["steps"], h["bytes_inter"] / 1e6, h["bytes_intra"] / 1e6,
                                                         "bit-identical to flat's" if h["losses"] == f["losses"] else "DIFFER"),
          "| flat | %d | %.1f MB | %.1f MB | |" % (f["steps"], f["bytes_inter"] / 1e6, f["bytes_intra"] / 1e6),
          "", "hierarchical / flat inter-node bytes: %.3f (target <= 1 / ranks_per_node = 0.5)" %
          (h["bytes_inter"] / f["bytes_inter"] if f["bytes_inter"] else float("nan"))]
L += ["", "Bytes are every rank's sends summed (control messages of 88 B per hop and fp32 payloads); eval loss is "
      "the config's eval set at the last step. The ranks share 2 cores, so no timing is reported."]
open(os.path.join(out, "summary.md"), "w").write("\n".join(L) + "\n")
for r in runs.values():
    del r["losses"]
json.dump({"steps": steps, "tau": tau, "runs": runs}, open(os.path.join(out, "summary.json"), "w"), indent=2)
print("\n".join(L))
PY
/usr/bin/python3 bench/plot_coherence.py "$RAW" "$OUT"   # eval_loss.png, inter_bytes.png
