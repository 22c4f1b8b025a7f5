#!/usr/bin/python3
"""Summary of bench/lr_sweep.sh: final eval loss per optimizer and lr, each optimizer's best lr,
steps and wall-clock of the best runs to reach AdamW's best final eval loss (and the ratio to
AdamW's wall-clock), and a plot of eval loss vs wall-clock for the four best runs.

usage: lr_sweep_summary.py RAW_DIR OUT_DIR STEPS
"""
import json
import pathlib
import re
import sys

raw, out, steps = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), int(sys.argv[3])
runs = {}
machines = {}
for d in sorted(raw.glob("*-lr*")):
    m = re.fullmatch(r"(.+)-lr([0-9.e+-]+)", d.name)
    f = d / "metrics.jsonl"
    if not m or not f.exists():
        continue
    rows = [json.loads(l) for l in f.read_text().splitlines() if l.strip()]
    if len(rows) < steps:
        continue
    evals = [(r["step"], r["elapsed_s"], r["eval_loss"]) for r in rows if "eval_loss" in r]
    runs.setdefault(m.group(1), {})[float(m.group(2))] = evals
    mf = d / "machine.txt"
    machines[(m.group(1), float(m.group(2)))] = mf.read_text().split(" | ")[0].strip() if mf.exists() else "unknown"

lines = [f"# lr sweep, bench-small, {steps} steps (bench/lr_sweep.sh)", "",
         "| optimizer | lr | final eval loss |", "|---|---|---|"]
best = {}
for opt, by_lr in runs.items():
    for lr, ev in sorted(by_lr.items()):
        lines.append(f"| {opt} | {lr:g} | {ev[-1][2]:.4f} |")
    lr = min(by_lr, key=lambda k: by_lr[k][-1][2])
    edge = " (grid edge)" if lr in (min(by_lr), max(by_lr)) else ""
    best[opt] = (lr, by_lr[lr], edge)

def reach(ev, target):  # first eval at or below target, interpolated in time and steps
    prev = None
    for s, t, loss in ev:
        if loss <= target:
            if prev is None:
                return s, t
            ps, pt, pl = prev
            a = (pl - target) / (pl - loss) if pl != loss else 1.0
            return ps + a * (s - ps), pt + a * (t - pt)
        prev = (s, t, loss)
    return None

lines += ["", "| optimizer | best lr | final eval loss | steps to AdamW's best | wall-clock s to it | vs AdamW |", "|---|---|---|---|---|---|"]
summary = {}
if "adamw" in best:
    target = best["adamw"][1][-1][2]
    base = reach(best["adamw"][1], target)
    for opt, (lr, ev, edge) in best.items():
        r = reach(ev, target)
        ratio = r[1] / base[1] if r and base else None
        summary[opt] = {"lr": lr, "final_eval_loss": ev[-1][2], "steps_to_target": r[0] if r else None,
                        "seconds_to_target": r[1] if r else None, "wall_clock_vs_adamw": ratio}
        lines.append(f"| {opt} | {lr:g}{edge} | {ev[-1][2]:.4f} | {f'{r[0]:.0f}' if r else 'not reached'} | "
                     f"{f'{r[1]:.0f}' if r else '-'} | {f'{ratio:.2f}x' if ratio else '-'} |")
best_machines = sorted({machines.get((opt, lr), "unknown") for opt, (lr, _, _) in best.items()})
lines += ["", "CPU of the best runs: " + "; ".join(best_machines)]
if len(best_machines) > 1:
    lines.append("**The best runs ran on different CPUs: their wall-clocks do not compare; steps do.**")
out.mkdir(parents=True, exist_ok=True)
(out / "summary.md").write_text("\n".join(lines) + "\n")
(out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
print("\n".join(lines))
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for opt, (lr, ev, _) in best.items():
        ax.plot([t for _, t, _ in ev], [l for _, _, l in ev], label=f"{opt} (lr {lr:g})")
    if "adamw" in best:
        ax.axhline(best["adamw"][1][-1][2], color="gray", lw=0.8, ls="--")
    ax.set_xlabel("wall-clock (s)")
    ax.set_ylabel("eval loss")
    ax.set_title(f"bench-small, best lr of each optimizer, {steps} steps")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "eval_vs_wallclock.png", dpi=120)
except ImportError:
    print("matplotlib missing: no plot")
