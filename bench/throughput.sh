#!/usr/bin/env bash
# Throughput benchmark of asteria on bench-small + AdamW, against PyTorch and OpenBLAS.
#
#   bench/throughput.sh [--rounds N] [--steps N] [--torch-steps N] [--torch-threads N] [--skip-asteria]
#
# One command: (a) builds asteria-train and bench_sgemm with cmake if needed (-j2),
# (b) makes a random token file for vocab 4096 (uint16, headerless, 4M tokens) under
# data/generated/bench/, (c) runs, interleaved, ROUNDS rounds (default 3) of
#     asteria-train  configs/bench-small-adamw.yaml, STEPS steps (default 30), first 5 skipped
#                    (train.warmup_steps=0: the config's 40 LR warm-up steps exceed STEPS, which
#                    the config check refuses; the LR schedule costs nothing)
#     torch          bench/torch_bench_small.py, best setup (tcmalloc preloaded, OpenMP OpenBLAS,
#                    2 threads, the best in-process variant: see torch_variants.sh), on the
#                    OpenBLAS kernels asteria runs (OPENBLAS_CORETYPE, unless already set)
#     torch          the same without tcmalloc (reference)
#     bench_sgemm    OpenBLAS sgemm at the model's GEMM shapes, FLOP-weighted step rate
# with the order reversed every other round, and (d) prints and writes
# bench/results/throughput-<date>.json: asteria tokens/s, torch tokens/s, their ratio (target
# >= 2), asteria's achieved FLOP rate = tokens/s x FLOPs per token, with
#     FLOPs per token = 6 x (parameters outside the input embedding) + 12 x layers x d_model x seq
# the sgemm weighted rate, achieved / sgemm (target >= 0.6), OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE
# and thread counts. Each run's tokens/s is the median over its measured steps; the headline is
# the median over rounds of those (a shared machine is noisy: other users' load lasts minutes and
# hits whole runs, so the file also has every round, the best round, and each run's cpu_share =
# CPU seconds / (wall seconds x 2 cores), which is well below 1 when others took the cores).
# If asteria-train does not build or run, the rest still runs and the file says why.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

ROUNDS=3
STEPS=30
TORCH_STEPS=12
TORCH_THREADS=2
SKIP_ASTERIA=0
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --torch-steps) TORCH_STEPS=$2; shift 2 ;;
    --torch-threads) TORCH_THREADS=$2; shift 2 ;;
    --skip-asteria) SKIP_ASTERIA=1; shift ;;
    *) echo "usage: bench/throughput.sh [--rounds N] [--steps N] [--torch-steps N] [--torch-threads N] [--skip-asteria]" >&2; exit 2 ;;
  esac
done

PY=/usr/bin/python3                       # Debian's python with torch 1.13 and numpy
BUILD=${ASTERIA_BUILD_DIR:-build}
LIB=/usr/lib/x86_64-linux-gnu
TCMALLOC=$LIB/libtcmalloc.so.4
BLAS_OPENMP=$LIB/openblas-openmp
STAMP=$(date +%Y%m%d-%H%M%S)
WORK=$ROOT/runs/bench-throughput-$STAMP
mkdir -p "$WORK" bench/results
OUT=bench/results/throughput-$STAMP.json
RAW=$WORK/raw.jsonl
: > "$RAW"
log() { echo "[throughput] $*" >&2; }

# (a) build
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  log "configuring $BUILD"
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release > "$WORK/cmake.log" 2>&1 || { cat "$WORK/cmake.log" >&2; exit 1; }
fi
log "building bench_sgemm"
cmake --build "$BUILD" -j2 --target bench_sgemm > "$WORK/build-sgemm.log" 2>&1 || { tail -30 "$WORK/build-sgemm.log" >&2; exit 1; }
ASTERIA_STATUS=ok
if [ "$SKIP_ASTERIA" = 1 ]; then
  ASTERIA_STATUS="skipped (--skip-asteria)"
else
  log "building asteria-train"
  if ! cmake --build "$BUILD" -j2 --target asteria-train > "$WORK/build-train.log" 2>&1; then
    ASTERIA_STATUS="asteria-train did not build (see $WORK/build-train.log)"
    log "$ASTERIA_STATUS; continuing without it"
    tail -5 "$WORK/build-train.log" >&2
  fi
fi

# (b) random tokens
TOKENS=data/generated/bench/random-v4096-4M.u16
if [ ! -s "$TOKENS" ]; then
  log "writing $TOKENS"
  mkdir -p "$(dirname "$TOKENS")"
  $PY -c "import numpy as np; np.random.default_rng(0).integers(0, 4096, size=4_000_000, dtype=np.uint16).tofile('$TOKENS')"
fi

# (b2) the same kernels for torch: asteria (runtime.blas auto) may re-exec itself with the CPU's
# best OpenBLAS kernel set where the library fell back to a generic one (docs/blas-kernels.md);
# torch loads the same library and would keep the fallback. Unless OPENBLAS_CORETYPE is set (then
# every process keeps it), torch runs with OPENBLAS_CORETYPE set to the set asteria runs, so the
# ratio compares like with like; each side's kernels are recorded.
TORCH_CORETYPE=${OPENBLAS_CORETYPE-}
ASTERIA_KERNELS=unknown
if [ "$ASTERIA_STATUS" = ok ]; then
  ASTERIA_KERNELS=$("$BUILD/bin/asteria-train" --config configs/bench-small-adamw.yaml --set data.train="$ROOT/$TOKENS" \
    --set data.eval= --dry-run 2>/dev/null | sed -n 's/^kernels: *OpenBLAS \([A-Za-z0-9_]*\).*/\1/p' | head -1)
  [ -n "$ASTERIA_KERNELS" ] || ASTERIA_KERNELS=unknown
  if [ -z "${OPENBLAS_CORETYPE+set}" ] && [ "$ASTERIA_KERNELS" != unknown ]; then TORCH_CORETYPE=$ASTERIA_KERNELS; fi
fi
log "kernels: asteria $ASTERIA_KERNELS; torch ${TORCH_CORETYPE:-its library choice} (OPENBLAS_CORETYPE ${OPENBLAS_CORETYPE-unset})"

# timed NAME ROUND CMD...: runs CMD under /usr/bin/time and records its wall and CPU seconds, so
# the summary can tell how much of the 2 cores each run got (others share this machine).
timed() {
  local name=$1 round=$2; shift 2
  /usr/bin/time -f '%e %U %S' -o "$WORK/time.txt" "$@"
  local rc=$?
  read -r wall user sys < "$WORK/time.txt" || true
  echo "{\"bench\": \"time\", \"what\": \"$name\", \"round\": $round, \"wall_s\": ${wall:-0}, \"cpu_s\": $(echo "${user:-0} + ${sys:-0}" | bc)}" >> "$RAW"
  return $rc
}

run_asteria() {  # round
  [ "$ASTERIA_STATUS" = ok ] || return 0
  local dir=$WORK/asteria-r$1
  log "round $1: asteria-train ($STEPS steps)"
  if timed asteria "$1" "$BUILD/bin/asteria-train" --config configs/bench-small-adamw.yaml --set data.train="$ROOT/$TOKENS" \
      --set data.eval= --set train.steps="$STEPS" --set train.warmup_steps=0 \
      --set run.dir="$dir" --set run.overwrite=true \
      > "$WORK/asteria-r$1.log" 2>&1; then
    $PY -c "import json,sys; print(json.dumps({'bench':'asteria','round':$1,'dir':'$dir'}))" >> "$RAW"
  else
    ASTERIA_STATUS="asteria-train failed in round $1 (see $WORK/asteria-r$1.log)"
    log "$ASTERIA_STATUS"; tail -5 "$WORK/asteria-r$1.log" >&2
  fi
}
run_torch() {  # round, malloc (tcmalloc|system)
  local pre=""
  [ "$2" = tcmalloc ] && pre=$TCMALLOC
  log "round $1: torch, $2 malloc ($TORCH_STEPS steps)"
  local coretype=()
  [ -n "$TORCH_CORETYPE" ] && coretype=(env OPENBLAS_CORETYPE="$TORCH_CORETYPE")
  LD_PRELOAD=$pre LD_LIBRARY_PATH=$BLAS_OPENMP timed "torch-$2" "$1" "${coretype[@]}" $PY bench/torch_bench_small.py --threads "$TORCH_THREADS" \
    --steps "$TORCH_STEPS" --warmup 3 --tag "round=$1 malloc=$2" >> "$RAW" 2> "$WORK/torch-r$1-$2.err" \
    || { log "torch failed"; cat "$WORK/torch-r$1-$2.err" >&2; exit 1; }
}
run_sgemm() {  # round
  log "round $1: bench_sgemm"
  timed sgemm "$1" "$BUILD/bin/bench_sgemm" --min-time 0.1 --repeats 5 \
    | $PY -c "import json,sys; j=json.loads(sys.stdin.read()); j['round']=$1; print(json.dumps(j))" >> "$RAW" \
    || { log "bench_sgemm failed"; exit 1; }
}

LOAD_START=$(cat /proc/loadavg)
T_START=$(date +%s)
for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then
    run_asteria "$r"; run_torch "$r" tcmalloc; run_torch "$r" system; run_sgemm "$r"
  else
    run_sgemm "$r"; run_torch "$r" system; run_torch "$r" tcmalloc; run_asteria "$r"
  fi
done
LOAD_END=$(cat /proc/loadavg)
T_END=$(date +%s)

# (d) summary
ASTERIA_STATUS=$ASTERIA_STATUS LOAD_START=$LOAD_START LOAD_END=$LOAD_END TORCH_CORETYPE=$TORCH_CORETYPE \
WALL=$((T_END - T_START)) STEPS=$STEPS ROUNDS=$ROUNDS \
$PY - "$RAW" "$OUT" <<'EOF'
import json, os, statistics, sys, platform
raw_path, out_path = sys.argv[1], sys.argv[2]
B, T, C, L, H, FF, V, E = 8, 256, 256, 4, 4, 1024, 4096, 4096
per_layer = C + 3 * C * C + C * C + C + 2 * FF * C + C * FF
params = E * C + L * per_layer + C + V * C
flops_per_token = 6 * (params - E * C) + 12 * L * C * T
SKIP = 5  # asteria steps skipped as warm-up

recs = [json.loads(l) for l in open(raw_path) if l.strip()]
med = statistics.median
cpu_share = {(x["what"], x["round"]): round(x["cpu_s"] / (x["wall_s"] * (os.cpu_count() or 1)), 2)
             for x in recs if x["bench"] == "time" and x["wall_s"] > 0}
res = {"date": os.path.basename(out_path)[len("throughput-"):-len(".json")],
       "model": "bench-small (d 256, 4 layers, 4 heads, seq 256, micro-batch 8, vocab 4096, SwiGLU 1024, untied) + AdamW",
       "params": params,
       "flops_per_token": flops_per_token,
       "flop_formula": "6 x (params outside the input embedding = %d) + 12 x layers x d_model x seq (= %d)"
                       % (params - E * C, 12 * L * C * T),
       "tokens_per_step": B * T, "rounds": int(os.environ["ROUNDS"]),
       "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "(unset)"),
       "OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE", "(unset)"),
       "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "(unset)"),
       "nproc": os.cpu_count(), "loadavg_start": os.environ["LOAD_START"],
       "loadavg_end": os.environ["LOAD_END"], "wall_s": int(os.environ["WALL"])}
try:
    res["cpu"] = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
except StopIteration:
    pass

# asteria
a_status = os.environ["ASTERIA_STATUS"]
a_steps, a_rounds, a_info = [], [], None
for r in (x for x in recs if x["bench"] == "asteria"):
    rows = [json.loads(l) for l in open(os.path.join(r["dir"], "metrics.jsonl")) if l.strip()]
    rows = [x for x in rows if x["step"] > SKIP]
    a_steps += rows
    if rows:
        a_rounds.append({"round": r["round"], "tokens_per_s": B * T / med(x["step_time_s"] for x in rows),
                         "steps": len(rows), "cpu_share": cpu_share.get(("asteria", r["round"]))})
    try:
        a_info = json.load(open(os.path.join(r["dir"], "run_info.json")))
    except OSError:
        pass
asteria = {"status": a_status if (a_steps or a_status != "ok") else "no metrics"}
if a_rounds:
    asteria.update({"tokens_per_s": med(x["tokens_per_s"] for x in a_rounds),
                    "tokens_per_s_best_round": max(x["tokens_per_s"] for x in a_rounds),
                    "tokens_per_s_pooled_steps": B * T / med(x["step_time_s"] for x in a_steps),
                    "fwd_s": med(x["fwd_s"] for x in a_steps), "bwd_s": med(x["bwd_s"] for x in a_steps),
                    "optim_s": med(x["optim_s"] for x in a_steps),
                    "steps_measured": len(a_steps), "warmup_steps_skipped": SKIP, "per_round": a_rounds})
    if a_info:
        asteria["threads"] = a_info.get("threads")
        asteria["params_reported"] = a_info.get("params")
        asteria["flops_per_token_reported"] = a_info.get("flops_per_token")
        asteria["openblas_corename"] = (a_info.get("blas") or {}).get("openblas_corename")
res["asteria"] = asteria

# torch
def torch_summary(malloc):
    rs = [x for x in recs if x["bench"] == "torch" and f"malloc={malloc}" in x["tag"]]
    if not rs:
        return None
    steps = [s for x in rs for s in x["step_times_s"]]
    rounds = [{"round": int(x["tag"].split()[0].split("=")[1]), "tokens_per_s": x["tokens_per_s"],
               "steps": x["steps_measured"],
               "cpu_share": cpu_share.get(("torch-" + malloc, int(x["tag"].split()[0].split("=")[1])))}
              for x in rs]
    return {"tokens_per_s": med(x["tokens_per_s"] for x in rounds),
            "tokens_per_s_best_round": max(x["tokens_per_s"] for x in rounds),
            "tokens_per_s_pooled_steps": B * T / med(steps),
            "fwd_s": med(x["fwd_s"] for x in rs), "bwd_s": med(x["bwd_s"] for x in rs),
            "optim_s": med(x["optim_s"] for x in rs), "steps_measured": len(steps),
            "per_round": rounds,
            "variant": rs[0]["variant"], "threads": rs[0]["threads"], "torch": rs[0]["torch"],
            "params": rs[0]["params"], "libraries": rs[0]["libraries"]}
res["torch_best"] = torch_summary("tcmalloc")
res["torch_best"]["setup"] = "tcmalloc LD_PRELOAD, OpenMP OpenBLAS, %d threads, %s" % (
    res["torch_best"]["threads"], res["torch_best"]["variant"])
res["torch_system_malloc"] = torch_summary("system")
# Which kernels each side ran (throughput.sh gives torch asteria's set unless OPENBLAS_CORETYPE is set).
torch_cores = sorted({x.get("openblas_corename") or "?" for x in recs if x["bench"] == "torch"})
res["kernels"] = {"asteria": asteria.get("openblas_corename"), "torch": torch_cores,
                  "torch_OPENBLAS_CORETYPE": os.environ.get("TORCH_CORETYPE") or "(unset: the library's choice)",
                  "bench_sgemm": sorted({x["openblas_corename"] for x in recs if x["bench"] == "sgemm"})}

# sgemm
sg = [x for x in recs if x["bench"] == "sgemm"]
res["sgemm"] = {"weighted_gflops": med(x["weighted_gflops"] for x in sg),
                "weighted_gflops_per_round": [x["weighted_gflops"] for x in sg],
                "cpu_share_per_round": [cpu_share.get(("sgemm", x["round"])) for x in sg],
                "weighted_gflops_linear_only": med(x["weighted_gflops_linear_only"] for x in sg),
                "weighted_gflops_best_samples": med(x["weighted_gflops_best_samples"] for x in sg),
                "weighting": sg[0]["weighting"], "openblas_library": sg[0]["openblas_library"],
                "openblas_parallel": sg[0]["openblas_parallel"], "openblas_threads": sg[0]["openblas_threads"],
                "openblas_corename": sg[0]["openblas_corename"],
                "shapes": [{"name": s["name"], "form": s["form"], "mnk": [s["m"], s["n"], s["k"]],
                            "batch": s["batch"],
                            "gflops": med(y["gflops"] for x in sg for y in x["shapes"]
                                          if y["name"] == s["name"] and y["form"].split(" [")[0] == s["form"].split(" [")[0]),
                            "step_flop_share": s["step_flop_share"]} for s in sg[0]["shapes"]]}

# headline numbers
h = {"torch_tokens_per_s": res["torch_best"]["tokens_per_s"],
     "torch_achieved_gflops": res["torch_best"]["tokens_per_s"] * flops_per_token * 1e-9,
     "sgemm_weighted_gflops": res["sgemm"]["weighted_gflops"],
     "threads": {"asteria": asteria.get("threads"), "torch": res["torch_best"]["threads"],
                 "openblas (bench_sgemm)": res["sgemm"]["openblas_threads"]}}
if "tokens_per_s" in asteria:
    ach = asteria["tokens_per_s"] * flops_per_token * 1e-9
    h.update({"asteria_tokens_per_s": asteria["tokens_per_s"],
              "ratio_asteria_over_torch_best_rounds":
                  asteria["tokens_per_s_best_round"] / res["torch_best"]["tokens_per_s_best_round"],
              "ratio_asteria_over_torch": asteria["tokens_per_s"] / res["torch_best"]["tokens_per_s"],
              "ratio_target": 2.0,
              # same-round ratios: both ran minutes apart, so a slow phase of the host hits both
              "ratio_per_round": [round(a["tokens_per_s"] / t["tokens_per_s"], 3)
                                  for a in asteria["per_round"] for t in res["torch_best"]["per_round"]
                                  if a["round"] == t["round"]],
              "asteria_achieved_gflops": ach,
              "ratio_achieved_over_sgemm": ach / res["sgemm"]["weighted_gflops"],
              "achieved_over_sgemm_target": 0.6})
    h["meets_ratio_target"] = h["ratio_asteria_over_torch"] >= 2.0
    h["meets_sgemm_target"] = h["ratio_achieved_over_sgemm"] >= 0.6
else:
    h["asteria"] = asteria["status"]
load1 = float(res["loadavg_start"].split()[0])
if load1 > 0.5:
    res["warning"] = ("load average %.2f on %d CPUs when the benchmark started: other processes share "
                      "the cores, numbers are noisy (see per_round)" % (load1, os.cpu_count()))
res = {"headline": h, **res}
with open(out_path, "w") as f:
    json.dump(res, f, indent=2)
    f.write("\n")

p = lambda k, v: print(f"  {k:34s} {v}")
print("throughput: bench-small + AdamW, B 8 x T 256 = 2048 tokens/step")
p("OPENBLAS_CORETYPE", res["OPENBLAS_CORETYPE"]); p("OPENBLAS_L2_SIZE", res["OPENBLAS_L2_SIZE"])
k = res["kernels"]
p("kernels", f"asteria {k['asteria']}, torch {', '.join(k['torch'])} (its OPENBLAS_CORETYPE: "
  f"{k['torch_OPENBLAS_CORETYPE']}), bench_sgemm {', '.join(k['bench_sgemm'])}")
p("threads", h["threads"]); p("load average start / end", f"{res['loadavg_start']} / {res['loadavg_end']}")
p("params", params); p("FLOPs per token", f"{flops_per_token} = {res['flop_formula']}")
if "asteria_tokens_per_s" in h:
    p("asteria tokens/s", f"{h['asteria_tokens_per_s']:.0f}  (per round: {[round(x['tokens_per_s']) for x in asteria['per_round']]}, "
      f"cpu share {[x['cpu_share'] for x in asteria['per_round']]})")
else:
    p("asteria", asteria["status"])
tb = res["torch_best"]
p("torch tokens/s (best setup)", f"{tb['tokens_per_s']:.0f}  ({tb['setup']}; per round: {[round(x['tokens_per_s']) for x in tb['per_round']]}, "
  f"cpu share {[x['cpu_share'] for x in tb['per_round']]})")
if res["torch_system_malloc"]:
    ts = res["torch_system_malloc"]
    p("torch tokens/s (system malloc)", f"{ts['tokens_per_s']:.0f}  (per round: {[round(x['tokens_per_s']) for x in ts['per_round']]})")
if "asteria_tokens_per_s" in h:
    p("ratio asteria / torch", f"{h['ratio_asteria_over_torch']:.2f}  (target >= 2; best rounds: {h['ratio_asteria_over_torch_best_rounds']:.2f})")
    p("ratio asteria / torch per round", f"{h['ratio_per_round']}  (median {med(h['ratio_per_round']):.2f})")
    p("asteria achieved GFLOP/s", f"{h['asteria_achieved_gflops']:.1f}")
p("torch achieved GFLOP/s", f"{h['torch_achieved_gflops']:.1f}")
p("sgemm weighted GFLOP/s", f"{h['sgemm_weighted_gflops']:.1f}  (per round: {[round(x, 1) for x in res['sgemm']['weighted_gflops_per_round']]})")
if "asteria_tokens_per_s" in h:
    p("achieved / sgemm", f"{h['ratio_achieved_over_sgemm']:.2f}  (target >= 0.6)")
p("wall seconds", res["wall_s"])
if "warning" in res:
    print("WARNING: " + res["warning"])
print(f"written: {out_path}")
EOF
