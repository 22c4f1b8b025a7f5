#!/usr/bin/env bash
# A/B step time of two asteria-train binaries (a change's before and after) on the shipped
# bench-small configs, in interleaved rounds so that the machine's drift hits both alike:
# AdamW (native) and SOAP (asteria mode), STEPS steps each, eval off, the first SKIP steps
# dropped; per binary and config the median and mean step time over all rounds' steps, after/before,
# SOAP's mean step against AdamW's for each binary, and each binary's mean time a step by part.
#   bench/ab_speed.sh BEFORE_BIN AFTER_BIN [ROUNDS] [STEPS]      defaults: 3 rounds, 30 steps
# Raw runs under runs/bench/ab-speed/ (gitignored); the table on stdout and in OUT/summary.txt
# (OUT: ASTERIA_BENCH_OUT, default bench/results/ab-speed).
set -euo pipefail
cd "$(dirname "$0")/.."
BEFORE=${1:?usage: bench/ab_speed.sh BEFORE_BIN AFTER_BIN [ROUNDS] [STEPS]}
AFTER=${2:?usage: bench/ab_speed.sh BEFORE_BIN AFTER_BIN [ROUNDS] [STEPS]}
ROUNDS=${3:-3}
STEPS=${4:-30}
SKIP=5
OUT=${ASTERIA_BENCH_OUT:-bench/results/ab-speed}
RAW=${ASTERIA_BENCH_RAW:-runs/bench/ab-speed}
scripts/prepare_data.sh 4096 >/dev/null
mkdir -p "$OUT" "$RAW"
for r in $(seq 1 "$ROUNDS"); do
  for cfg in adamw soap; do
    mode=native
    [[ $cfg == soap ]] && mode=asteria
    # Alternate which binary goes first.
    order=(before after)
    (( r % 2 == 0 )) && order=(after before)
    for which in "${order[@]}"; do
      bin=$BEFORE
      [[ $which == after ]] && bin=$AFTER
      "$bin" --config "configs/bench-small-$cfg.yaml" --set "run.dir=$RAW/$cfg-$which-r$r" --set run.overwrite=true \
        --set "train.steps=$STEPS" --set train.warmup_steps=0 --set train.eval_every=0 --set data.eval= \
        --set "runtime.mode=$mode" >/dev/null
    done
  done
done
/usr/bin/python3 - "$RAW" "$ROUNDS" "$SKIP" <<'PY' | tee "$OUT/summary.txt"
import json, statistics, sys
raw, rounds, skip = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
print(f"bench/ab_speed.sh: {rounds} interleaved rounds; step time after {skip} steps, median and mean "
      "(the mean counts the steps that wait on a refresh)")
print(f"{'config':8s} {'before s':>9s} {'after s':>9s} {'after/before':>13s} {'mean before':>12s} {'mean after':>11s} {'after/before':>13s}")
# Each binary's and config's steps after the first `skip`, over all rounds.
steps = {}
for cfg in ("adamw", "soap"):
    for which in ("before", "after"):
        steps[cfg, which] = []
        for r in range(1, rounds + 1):
            rows = [json.loads(l) for l in open(f"{raw}/{cfg}-{which}-r{r}/metrics.jsonl") if l.strip()]
            steps[cfg, which] += [x for x in rows if x["step"] > skip]
mean = {}
for cfg in ("adamw", "soap"):
    med = {}
    for which in ("before", "after"):
        times = [x["step_time_s"] for x in steps[cfg, which]]
        med[which], mean[cfg, which] = statistics.median(times), statistics.mean(times)
    print(f"{cfg:8s} {med['before']:9.3f} {med['after']:9.3f} {med['after'] / med['before']:13.3f} "
          f"{mean[cfg, 'before']:12.3f} {mean[cfg, 'after']:11.3f} {mean[cfg, 'after'] / mean[cfg, 'before']:13.3f}")
print(f"SOAP / AdamW mean step: before {mean['soap', 'before'] / mean['adamw', 'before']:.2f}, "
      f"after {mean['soap', 'after'] / mean['adamw', 'after']:.2f}")
# Where the step went, per binary: a change to the optimizer shows in its own columns even when the
# shared machine moves every run's forward and backward by more (they are the same code in both).
parts = ("fwd_s", "bwd_s", "optim_s", "root_jobs_s", "staging_s")
print("mean seconds a step by part (steps after the first " + str(skip) + ", all rounds)")
print(f"{'run':14s} " + " ".join(f"{k:>12s}" for k in parts))
for cfg in ("adamw", "soap"):
    for which in ("before", "after"):
        rows = steps[cfg, which]
        print(f"{cfg + ' ' + which:14s} " + " ".join(f"{statistics.mean(x.get(k, 0.0) for x in rows):12.4f}" for k in parts))
PY
