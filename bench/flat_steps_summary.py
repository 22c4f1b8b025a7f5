#!/usr/bin/python3
"""Step-time flatness of bench/flat_steps.sh's runs, separating the schedule from the machine:

  step p95/med      p95 / median of the whole step (what a user sees; includes this VM's noise)
  fwd+bwd p95/med   the same for forward + backward alone, which no optimizer setting touches:
                    the machine's own noise floor in that run
  periodic max/med  the median step time at each position of the refresh period (step mod F),
                    max over positions / median over positions: a spike the schedule puts at a
                    step shows here, a stall of the machine does not
  opt mean, p95     step - fwd - bwd (optimizer, root jobs, staging), mean and p95, seconds
  mean vs native    an asteria run's mean step over its native run's

usage: flat_steps_summary.py RAW_DIR SKIP PERIOD NAME...   (names: adamw, <opt>-native, <opt>-asteria)
"""
import json
import statistics as st
import sys


def pct(xs, q):
    xs = sorted(xs)
    k = (len(xs) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


raw, skip, period, names = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
means = {}
print(f"{'run':20s} {'median s':>8s} {'mean s':>7s} {'step p95/med':>12s} {'fwd+bwd p95/med':>15s} "
      f"{'periodic max/med':>16s} {'opt mean':>8s} {'opt p95':>7s} {'mean vs native':>14s}")
for n in names:
    rows = [json.loads(l) for l in open(f"{raw}/{n}/metrics.jsonl") if l.strip()]
    rows = [r for r in rows if r["step"] > skip]
    step = [r["step_time_s"] for r in rows]
    fb = [r["fwd_s"] + r["bwd_s"] for r in rows]
    opt = [r["step_time_s"] - r["fwd_s"] - r["bwd_s"] for r in rows]
    per = [st.median([r["step_time_s"] for r in rows if r["step"] % period == k]) for k in range(period)]
    means[n] = st.fmean(step)
    native = n.replace("-asteria", "-native")
    vs = f"{means[n] / means[native]:.3f}" if n.endswith("-asteria") and native in means else "-"
    print(f"{n:20s} {st.median(step):8.3f} {means[n]:7.3f} {pct(step, .95) / st.median(step):12.2f} "
          f"{pct(fb, .95) / st.median(fb):15.2f} {max(per) / st.median(per):16.2f} {st.fmean(opt):8.3f} "
          f"{pct(opt, .95):7.3f} {vs:>14s}")
