#!/usr/bin/python3
"""Plots Asteria metrics.jsonl files (one or more runs) as PNGs.

usage: plot_metrics.py RUN_DIR_OR_METRICS [...] --out DIR [--labels a,b,...]

Writes DIR/loss_vs_step.png, DIR/loss_vs_time.png and DIR/step_time.png. Training loss is drawn
as a line, eval loss (where present) as markers of the same colour.
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path):
    if os.path.isdir(path):
        path = os.path.join(path, "metrics.jsonl")
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                sys.exit(f"plot_metrics: {path}:{n}: not a JSON line: {e}")
    if not rows:
        sys.exit(f"plot_metrics: {path}: no metrics")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--labels", default="")
    args = ap.parse_args()
    labels = args.labels.split(",") if args.labels else [os.path.basename(os.path.normpath(r)) for r in args.runs]
    if len(labels) != len(args.runs):
        sys.exit("plot_metrics: --labels needs one label per run")
    runs = [(label, load(r)) for label, r in zip(labels, args.runs)]
    os.makedirs(args.out, exist_ok=True)

    def loss_plot(xkey, xlabel, name):
        fig, ax = plt.subplots(figsize=(8, 5))
        for i, (label, rows) in enumerate(runs):
            color = f"C{i}"
            ax.plot([r[xkey] for r in rows], [r["loss"] for r in rows], color=color, lw=1, alpha=0.7,
                    label=f"{label} train")
            ev = [r for r in rows if "eval_loss" in r]
            if ev:
                ax.plot([r[xkey] for r in ev], [r["eval_loss"] for r in ev], "o-", color=color, ms=4,
                        label=f"{label} eval")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("loss (nats/token)")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(args.out, name), dpi=110)
        plt.close(fig)

    loss_plot("step", "step", "loss_vs_step.png")
    loss_plot("elapsed_s", "wall-clock time (s)", "loss_vs_time.png")

    fig, ax = plt.subplots(figsize=(8, 5))
    for i, (label, rows) in enumerate(runs):
        ax.plot([r["step"] for r in rows], [r["step_time_s"] for r in rows], color=f"C{i}", lw=1, label=label)
    ax.set_xlabel("step")
    ax.set_ylabel("step time (s)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "step_time.png"), dpi=110)
    plt.close(fig)
    for n in ("loss_vs_step.png", "loss_vs_time.png", "step_time.png"):
        print(os.path.join(args.out, n))


if __name__ == "__main__":
    main()
