#!/usr/bin/env python3
"""Plots of bench/coherence.sh's runs: eval loss against step, and the cumulative inter-node
coherence bytes against step, one line per staleness run (fsdp hybrid).

    /usr/bin/python3 bench/plot_coherence.py RAW_DIR OUT_DIR
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

RUNS = [("hybrid-s1", "S = 1"), ("hybrid-s2", "S = 2"), ("hybrid-s5", "S = 5"), ("hybrid-s5-tau", "S = 5 with tau")]


def main():
    raw, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    fig_e, ax_e = plt.subplots(figsize=(6, 4))
    fig_b, ax_b = plt.subplots(figsize=(6, 4))
    for name, label in RUNS:
        path = os.path.join(raw, name, "metrics.jsonl")
        if not os.path.exists(path):
            continue
        recs = [json.loads(line) for line in open(path)]
        ev = [(r["step"], r["eval_loss"]) for r in recs if "eval_loss" in r]
        if ev:
            ax_e.plot(*zip(*ev), marker="o", label=label)
        total, steps, cum = 0.0, [], []
        for r in recs:
            total += r.get("coherence_bytes_inter", 0)
            steps.append(r["step"])
            cum.append(total / 1e6)
        ax_b.plot(steps, cum, label=label)
    ax_e.set_xlabel("step")
    ax_e.set_ylabel("eval loss")
    ax_e.set_title("bench-small SOAP, hybrid 2 x 2: eval loss")
    ax_e.legend()
    ax_b.set_xlabel("step")
    ax_b.set_ylabel("coherence bytes between nodes (MB, cumulative)")
    ax_b.set_title("bench-small SOAP, hybrid 2 x 2: inter-node bytes")
    ax_b.legend()
    fig_e.tight_layout()
    fig_b.tight_layout()
    fig_e.savefig(os.path.join(out, "eval_loss.png"), dpi=100)
    fig_b.savefig(os.path.join(out, "inter_bytes.png"), dpi=100)


if __name__ == "__main__":
    main()
