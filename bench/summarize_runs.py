#!/usr/bin/python3
"""Summarizes Asteria runs (metrics.jsonl) side by side: final eval loss, the step and time at
which each run first reaches the baseline's final eval loss, and the step-time distribution.

usage: summarize_runs.py --baseline RUN RUN [RUN ...] [--json OUT.json] [--skip-steps N]

The first RUN given to --baseline is the reference (AdamW). Step times skip the first N steps
(warm-up, default 2). Eval steps carry the eval wall time inside the step, so step-time
statistics exclude eval steps' "eval_s".
"""
import argparse
import json
import os
import statistics
import sys


def load(path):
    p = os.path.join(path, "metrics.jsonl") if os.path.isdir(path) else path
    with open(p) as f:
        return [json.loads(line) for line in f if line.strip()]


def percentile(xs, q):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summarize(name, rows, target, skip):
    times = [r["step_time_s"] for r in rows if r["step"] > skip]
    evals = [r for r in rows if "eval_loss" in r]
    reach = next((r for r in evals if r["eval_loss"] <= target), None) if target is not None else None
    return {
        "run": name,
        "steps": rows[-1]["step"],
        "final_eval_loss": evals[-1]["eval_loss"] if evals else None,
        "reaches_baseline_final_eval_at_step": reach["step"] if reach else None,
        "reaches_baseline_final_eval_at_s": reach["elapsed_s"] if reach else None,
        "step_time_median_s": statistics.median(times),
        "step_time_mean_s": statistics.fmean(times),
        "step_time_p95_s": percentile(times, 0.95),
        "step_time_p99_s": percentile(times, 0.99),
        "step_time_max_s": max(times),
        "p95_over_median": percentile(times, 0.95) / statistics.median(times),
        "max_over_median": max(times) / statistics.median(times),
        "wall_s": rows[-1]["elapsed_s"],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", required=True)
    ap.add_argument("runs", nargs="*")
    ap.add_argument("--json")
    ap.add_argument("--skip-steps", type=int, default=2)
    a = ap.parse_args()
    base = load(a.baseline)
    base_evals = [r["eval_loss"] for r in base if "eval_loss" in r]
    target = base_evals[-1] if base_evals else None
    out = [summarize(os.path.basename(os.path.normpath(a.baseline)), base, target, a.skip_steps)]
    out += [summarize(os.path.basename(os.path.normpath(r)), load(r), target, a.skip_steps) for r in a.runs]
    for s in out:
        s["mean_vs_baseline"] = s["step_time_mean_s"] / out[0]["step_time_mean_s"]
    hdr = f"{'run':28s} {'final eval':>10s} {'reach@step':>10s} {'reach@s':>8s} {'median s':>9s} {'mean s':>8s} {'p95/med':>8s} {'p99 s':>8s} {'max s':>8s} {'max/med':>8s} {'mean/base':>9s}"
    if target is not None:
        print(f"baseline final eval loss: {target:.4f}")
    print(hdr)
    for s in out:
        fmt = lambda v, f: (f % v) if v is not None else "-"
        print(f"{s['run']:28s} {fmt(s['final_eval_loss'], '%.4f'):>10s} {fmt(s['reaches_baseline_final_eval_at_step'], '%d'):>10s} "
              f"{fmt(s['reaches_baseline_final_eval_at_s'], '%.0f'):>8s} {s['step_time_median_s']:9.3f} {s['step_time_mean_s']:8.3f} "
              f"{s['p95_over_median']:8.2f} {s['step_time_p99_s']:8.3f} {s['step_time_max_s']:8.3f} {s['max_over_median']:8.2f} {s['mean_vs_baseline']:9.3f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"baseline_final_eval_loss": target, "runs": out}, f, indent=2)


if __name__ == "__main__":
    main()
