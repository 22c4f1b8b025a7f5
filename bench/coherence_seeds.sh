#!/usr/bin/env bash
# The coherence rule over several seeds (issue 31): is staleness S with a tolerance within 0.5 %
# of S = 1's final eval loss, beyond the seed-to-seed spread? bench-small SOAP, asteria mode, the
# settings of bench/coherence.sh (fsdp hybrid, 4 ranks as 2 "nodes" x 2, micro-batch 2,
# runtime.stagger=false, one thread per rank: 4 ranks share 2 cores; the figures are losses and
# bytes, whose bits do not depend on timing), STEPS steps per run.
#   bench/coherence_seeds.sh [STEPS] [SEEDS] [RUNS]
#     SEEDS: "0 1 2" (default); RUNS: "NAME:SETS,..." items, default
#     "s1: s5-tau0.3:staleness=5,tolerance=0.3" (keys under runtime.coherence).
# Each seed's runs are compared with that seed's S = 1 (the run named s1, always made).
# ASTERIA_BENCH_REUSE=1 keeps finished runs. Raw runs: runs/bench/coherence-seeds/ (gitignored);
# bench/results/coherence-seeds/summary.md and summary.json.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-400}
SEEDS=${2:-0 1 2}
RUNS=${3:-s5-tau0.3:staleness=5,tolerance=0.3}
OUT=bench/results/coherence-seeds
RAW=${ASTERIA_BENCH_RAW:-runs/bench/coherence-seeds}
BUILD=${ASTERIA_BUILD_DIR:-build}
cmake --build "$BUILD" -j2 --target asteria-train >/dev/null
scripts/prepare_data.sh 4096 >/dev/null
mkdir -p "$OUT" "$RAW"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() {  # NAME SEED SETS(k=v,... under runtime.coherence)
  local name=$1 seed=$2 sets=$3 dir=$RAW/$1-seed$2
  if [[ ${ASTERIA_BENCH_REUSE:-0} == 1 && -f $dir/metrics.jsonl ]] && [[ $(wc -l <"$dir/metrics.jsonl") -ge $STEPS ]]; then
    echo "[coherence-seeds] $name seed $seed: kept" >&2
    return 0
  fi
  local args=(--set run.dir="$dir" --set run.overwrite=true --set checkpoint.enabled=false --set seed="$seed"
              --set train.steps="$STEPS" --set train.micro_batch=2 --set runtime.mode=asteria
              --set distributed.fsdp=hybrid --set distributed.ranks_per_node=2 --set runtime.stagger=false)
  local kv
  for kv in ${sets//,/ }; do args+=(--set "runtime.coherence.$kv"); done
  echo "[coherence-seeds] $name seed $seed (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  mpirun --oversubscribe --bind-to none -np 4 -x OMP_NUM_THREADS=1 \
    "$BUILD/bin/asteria-train" --config configs/bench-small-soap.yaml "${args[@]}" >"$dir.log" 2>&1 ||
    { echo "[coherence-seeds] $name seed $seed FAILED:" >&2; tail -5 "$dir.log" >&2; return 1; }
}
for seed in $SEEDS; do
  run s1 "$seed" staleness=1
  for item in $RUNS; do run "${item%%:*}" "$seed" "${item#*:}"; done
done
/usr/bin/python3 - "$RAW" "$OUT" "$STEPS" "$SEEDS" "$RUNS" <<'PY'
import json, os, statistics, sys, time
raw, out, steps, seeds, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split(), sys.argv[5].split()
names = ["s1"] + [r.split(":")[0] for r in runs]
def load(name, seed):
    p = os.path.join(raw, f"{name}-seed{seed}", "metrics.jsonl")
    recs = [json.loads(l) for l in open(p)] if os.path.exists(p) else []
    if len(recs) < steps:
        return None
    ev = [r["eval_loss"] for r in recs if "eval_loss" in r]
    return {"final_eval_loss": ev[-1], "bytes_inter": sum(r.get("coherence_bytes_inter", 0) for r in recs)}
res = {n: {s: load(n, s) for s in seeds} for n in names}
L = [f"# The coherence rule over seeds ({time.strftime('%Y-%m-%d %H:%M')})", "",
     f"`bench/coherence_seeds.sh {steps} \"{' '.join(seeds)}\" \"{' '.join(runs)}\"`: bench-small SOAP, asteria mode, fsdp hybrid,",
     "4 ranks as 2 \"nodes\" x 2 (one thread each, sharing 2 cores), micro-batch 2, runtime.stagger=false; final eval loss",
     "(the config's eval set) of each run against S = 1 of the same seed.", "",
     "| run | " + " | ".join(f"seed {s}" for s in seeds) + " | mean | inter-node bytes vs S = 1 |",
     "|---|" + "---|" * (len(seeds) + 2)]
summary = {}
for n in names:
    devs, ratios, cells = [], [], []
    for s in seeds:
        r, b = res[n][s], res["s1"][s]
        if not r or not b:
            cells.append("-")
            continue
        d = 100 * (r["final_eval_loss"] - b["final_eval_loss"]) / b["final_eval_loss"]
        devs.append(d)
        ratios.append(r["bytes_inter"] / b["bytes_inter"])
        cells.append(f"{r['final_eval_loss']:.4f}" if n == "s1" else f"{r['final_eval_loss']:.4f} ({d:+.2f} %)")
    mean = f"{statistics.mean(devs):+.2f} %" if devs and n != "s1" else "-"
    ratio = f"{statistics.mean(ratios):.3f}" if ratios else "-"
    L.append(f"| {n} | " + " | ".join(cells) + f" | {mean} | {ratio} |")
    summary[n] = {"per_seed": res[n], "mean_dev_pct": statistics.mean(devs) if devs else None,
                  "bytes_vs_s1": statistics.mean(ratios) if ratios else None}
s1 = [res["s1"][s]["final_eval_loss"] for s in seeds if res["s1"][s]]
if len(s1) > 1:
    L += ["", f"S = 1's own spread over the seeds: {100 * (max(s1) - min(s1)) / statistics.mean(s1):.2f} % of its mean final eval loss."]
open(os.path.join(out, "summary.md"), "w").write("\n".join(L) + "\n")
json.dump({"steps": steps, "seeds": seeds, "runs": summary}, open(os.path.join(out, "summary.json"), "w"), indent=1)
print("\n".join(L))
PY
