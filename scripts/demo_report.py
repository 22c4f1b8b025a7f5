#!/usr/bin/python3
"""The demo's report: two runs' eval loss against wall-clock and against steps, drawn in the
terminal with both curves, and when each first reached the baseline's final eval loss.

usage: demo_report.py BASELINE_RUN OTHER_RUN [--labels AdamW,SOAP] [--json OUT]

A run is reached at its first eval whose loss is at or below the target; its time is that
record's elapsed_s (the run's wall-clock from its first step, evals included, as both runs pay
them alike).
"""
import argparse
import json
import os
import sys

WIDTH, HEIGHT = 64, 16


def load(run):
    path = os.path.join(run, "metrics.jsonl")
    try:
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        sys.exit(f"demo_report: {path}: {e}")
    evals = [r for r in rows if "eval_loss" in r]
    if not evals:
        sys.exit(f"demo_report: {path}: no eval loss recorded (train.eval_every)")
    return rows, evals


def reached(evals, target):
    """The first eval at or below target: (step, elapsed_s), or None."""
    for r in evals:
        if r["eval_loss"] <= target:
            return r["step"], r["elapsed_s"]
    return None


def text_plot(series, xkey, xlabel):
    """series: [(mark, evals)]; draws eval_loss against xkey on a WIDTH x HEIGHT grid."""
    xs = [r[xkey] for _, ev in series for r in ev]
    ys = [r["eval_loss"] for _, ev in series for r in ev]
    x0, x1, y0, y1 = 0.0, max(xs), min(ys), max(ys)
    if y1 - y0 < 1e-9:
        y1 = y0 + 1
    grid = [[" "] * WIDTH for _ in range(HEIGHT)]
    for mark, ev in series:
        for r in ev:
            c = min(WIDTH - 1, int(round((r[xkey] - x0) / (x1 - x0) * (WIDTH - 1))))
            row = min(HEIGHT - 1, int(round((y1 - r["eval_loss"]) / (y1 - y0) * (HEIGHT - 1))))
            grid[row][c] = "*" if grid[row][c] not in (" ", mark) else mark
    lines = []
    for i, row in enumerate(grid):
        label = f"{y1 - (y1 - y0) * i / (HEIGHT - 1):7.3f} |" if i % 5 == 0 or i == HEIGHT - 1 else "        |"
        lines.append(label + "".join(row))
    lines.append("        +" + "-" * WIDTH)
    lines.append(f"         0{xlabel:^{WIDTH - 12}}{x1:>10.0f}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("baseline")
    ap.add_argument("other")
    ap.add_argument("--labels", default="AdamW,SOAP")
    ap.add_argument("--json")
    a = ap.parse_args()
    names = a.labels.split(",")
    if len(names) != 2:
        sys.exit("demo_report: --labels needs two labels")
    (base_rows, base_ev), (other_rows, other_ev) = load(a.baseline), load(a.other)
    target = base_ev[-1]["eval_loss"]
    marks = [names[0][0].upper(), names[1][0].upper()]
    if marks[0] == marks[1]:
        marks = ["A", "B"]
    series = [(marks[0], base_ev), (marks[1], other_ev)]
    legend = f"{marks[0]} = {names[0]}, {marks[1]} = {names[1]}, * = both"
    print(f"eval loss against wall-clock ({legend})")
    print(text_plot(series, "elapsed_s", "seconds"))
    print()
    print(f"eval loss against steps ({legend})")
    print(text_plot(series, "step", "steps"))
    print()
    result = {"target_eval_loss": target, "runs": {}}
    print(f"time to {names[0]}'s final eval loss {target:.4f}:")
    for name, rows, ev in ((names[0], base_rows, base_ev), (names[1], other_rows, other_ev)):
        hit = reached(ev, target)
        total = rows[-1]["elapsed_s"]
        result["runs"][name] = {"final_eval_loss": ev[-1]["eval_loss"], "steps": rows[-1]["step"], "elapsed_s": total,
                                "reached_step": hit[0] if hit else None, "reached_s": hit[1] if hit else None}
        if hit:
            print(f"  {name:>6}: step {hit[0]:4d} at {hit[1]:6.1f} s  (final eval loss {ev[-1]['eval_loss']:.4f} "
                  f"after {rows[-1]['step']} steps, {total:.1f} s)")
        else:
            print(f"  {name:>6}: not reached in {rows[-1]['step']} steps, {total:.1f} s (final eval loss "
                  f"{ev[-1]['eval_loss']:.4f})")
    b, o = result["runs"][names[0]], result["runs"][names[1]]
    if o["reached_s"] is not None:
        print(f"  {names[1]} got there in {o['reached_s'] / b['reached_s']:.2f}x {names[0]}'s wall-clock and "
              f"{o['reached_step'] / b['reached_step']:.2f}x its steps")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
