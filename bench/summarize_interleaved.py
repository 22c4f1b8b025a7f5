#!/usr/bin/python3
"""Summarizes bench/profile_interleaved.sh: runs RUNS/NAME-rR (R = 1..ROUNDS) of each NAME.

usage: summarize_interleaved.py RUNS ROUNDS SKIP PERIOD NAME [NAME ...] [--out OUT]

OUT (default RUNS) receives the summary and the plot; the runs are only read.

The first NAME is the baseline (AdamW). Per NAME, over the step times of all rounds after the
first SKIP steps of each run: median, mean, p99, max, max/median; the steady profile (each step's
median over the rounds) and its max/median; the periodic profile (each position in the refresh
period, step % PERIOD: its median over every period of every round) and its max/median, which
is what the refresh schedule does to the step time with the machine's stalls left out (a spike
the schedule puts at a position shows in every period, a stall of the machine in one); the mean relative to the baseline and, for
"<opt>-workers" / "<opt>-compute", relative to "<opt>-native", also per round (a round's configs
ran back to back, so their ratio is the least affected by the machine's drift). Writes
OUT/summary.json and OUT/step_time_profile.png: each step's median over the rounds, one panel per
optimizer (native, workers, compute) with the baseline in every panel.
"""
import json
import pathlib
import statistics
import sys

from summarize_runs import percentile


def step_times(out, name, r, skip):
    with open(out / f"{name}-r{r}" / "metrics.jsonl") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return {x["step"]: x["step_time_s"] for x in rows if x["step"] > skip}


def main():
    args = sys.argv[1:]
    out_dir = None
    if "--out" in args:
        i = args.index("--out")
        out_dir = pathlib.Path(args[i + 1])
        del args[i:i + 2]
    src, rounds, skip, period = pathlib.Path(args[0]), int(args[1]), int(args[2]), int(args[3])
    names = args[4:]
    out = out_dir or src
    out.mkdir(parents=True, exist_ok=True)
    runs = {n: [step_times(src, n, r, skip) for r in range(1, rounds + 1)] for n in names}
    mean = {n: [statistics.fmean(t.values()) for t in runs[n]] for n in names}
    base = names[0]
    rows = []
    for n in names:
        pooled = [x for t in runs[n] for x in t.values()]
        steps = sorted(set.intersection(*(set(t) for t in runs[n])))
        steady = [statistics.median(t[s] for t in runs[n]) for s in steps]
        by_position = {}
        for t in runs[n]:
            for s, x in t.items():
                by_position.setdefault(s % period, []).append(x)
        periodic = [statistics.median(xs) for xs in by_position.values()]
        native = n.rsplit("-", 1)[0] + "-native" if n.endswith(("-workers", "-compute")) else None
        row = {
            "run": n,
            "steps": len(pooled),
            "median_s": statistics.median(pooled),
            "mean_s": statistics.fmean(pooled),
            "p99_s": percentile(pooled, 0.99),
            "max_s": max(pooled),
            "max_over_median": max(pooled) / statistics.median(pooled),
            "steady_max_over_median": max(steady) / statistics.median(steady),
            "periodic_max_over_median": max(periodic) / statistics.median(periodic),
            "mean_over_baseline": statistics.fmean(pooled) / statistics.fmean(x for t in runs[base] for x in t.values()),
        }
        if native in runs:
            row["mean_over_native"] = row["mean_s"] / statistics.fmean(x for t in runs[native] for x in t.values())
            row["mean_over_native_per_round"] = [a / b for a, b in zip(mean[n], mean[native])]
        rows.append(row)
    print(f"{'run':20s} {'steps':>5s} {'median s':>8s} {'mean s':>7s} {'p99 s':>7s} {'max s':>7s} {'max/med':>7s} "
          f"{'steady':>7s} {'period':>7s} {'/' + base:>7s} {'/native':>7s}  per round /native")
    for r in rows:
        nat = f"{r['mean_over_native']:7.3f}" if "mean_over_native" in r else f"{'':7s}"
        per = " ".join(f"{x:.3f}" for x in r.get("mean_over_native_per_round", []))
        print(f"{r['run']:20s} {r['steps']:5d} {r['median_s']:8.3f} {r['mean_s']:7.3f} {r['p99_s']:7.3f} {r['max_s']:7.3f} "
              f"{r['max_over_median']:7.2f} {r['steady_max_over_median']:7.2f} {r['periodic_max_over_median']:7.2f} {r['mean_over_baseline']:7.3f} {nat}  {per}")
    print("steady: max/median of each step's median over the rounds; "
          f"period: max/median of each position's (step % {period}) median over all periods and rounds")
    with open(out / "summary.json", "w") as f:
        json.dump(rows, f, indent=1)
    plot(out, runs, base, [n for n in names if n != base])


def plot(out, runs, base, names):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def steady(n):
        steps = sorted(set.intersection(*(set(t) for t in runs[n])))
        return steps, [statistics.median(t[s] for t in runs[n]) for s in steps]

    groups = {}
    for n in names:
        groups.setdefault(n.rsplit("-", 1)[0], []).append(n)
    fig, axes = plt.subplots(len(groups), 1, figsize=(10, 3.2 * len(groups)), sharex=True, squeeze=False)
    for ax, (group, members) in zip(axes[:, 0], groups.items()):
        ax.plot(*steady(base), color="grey", lw=1, label=base)
        for n in members:
            ax.plot(*steady(n), lw=1.2, label=n)
        ax.set_ylabel("step time s")
        ax.set_title(f"{group}: each step's median over {len(runs[base])} rounds")
        ax.legend(fontsize=8, loc="upper right")
    axes[-1, 0].set_xlabel("step")
    fig.tight_layout()
    fig.savefig(out / "step_time_profile.png", dpi=110)


if __name__ == "__main__":
    main()
