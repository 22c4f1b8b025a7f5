#!/usr/bin/python3
"""Summary of bench/olmo_1b_shadow.sh: step times of the synchronous recipe and of the shadow
pipeline in flight (parked on the disk tier), steps 2..STEPS, and what the job store moved.

usage: olmo_1b_shadow_summary.py RAW_DIR STEPS
"""
import json, math, pathlib, re, statistics, sys
raw, steps = pathlib.Path(sys.argv[1]), int(sys.argv[2])
GiB = 1 << 30
runs = {"sync": "configs/olmo-1b-soap.yaml as shipped (refreshes synchronous for the first 2000 steps)",
        "in-flight": "the same with runtime.shadow.sync_steps=1 (the shadow pipeline on from step 2)"}

def p95(xs):  # nearest rank
    s = sorted(xs)
    return s[max(0, math.ceil(0.95 * len(s)) - 1)]

print(f"# OLMo-1B SOAP: the shadow pipeline in flight against synchronous refreshes (bench/olmo_1b_shadow.sh {steps})\n")
print("```\n" + (raw / "sync" / "env.txt").read_text().strip() + "\n```\n")
rows, detail = [], []
for name, what in runs.items():
    d = raw / name
    recs = [json.loads(l) for l in (d / "soap" / "metrics.jsonl").read_text().splitlines() if l.strip()]
    later = [r for r in recs if r["step"] >= 2]
    t = [r["step_time_s"] for r in later]
    timed = re.search(r"Maximum resident set size \(kbytes\): (\d+)", (d / "soap.time").read_text())
    peak = int(timed.group(1)) * 1024 / GiB if timed else float("nan")
    placement = [l.strip() for l in (d / "soap.dry-run.txt").read_text().splitlines() if l.strip().startswith("runtime.shadow")]
    mean = lambda k: statistics.mean(r.get(k, 0) for r in later)
    rows.append(f"| {name} | {recs[0]['step_time_s']:.1f} | {statistics.mean(t):.1f} | {statistics.median(t):.1f} | "
                f"{p95(t):.1f} | {max(t):.1f} | {p95(t) / statistics.median(t):.3f} | {mean('optim_s'):.1f} | "
                f"{mean('root_jobs_s'):.1f} | {mean('shadow_park_write_bytes') / 1e9:.2f} / {mean('shadow_park_read_bytes') / 1e9:.2f} | "
                f"{mean('shadow_park_s'):.1f} | {peak:.2f} |")
    detail.append(f"\n## {name}: {what}\n\nplacement: " + ("; ".join(p.split(' -- ')[0] for p in placement) or "no shadow part") + "\n")
    detail.append("| step | loss | step s | optim s | root jobs s | in flight | parked GB | park write / read GB | park s | jobs in memory |")
    detail.append("|---|---|---|---|---|---|---|---|---|---|")
    for r in recs:
        detail.append(f"| {r['step']} | {r['loss']:.4f} | {r['step_time_s']:.1f} | {r['optim_s']:.1f} | {r.get('root_jobs_s', 0):.1f} | "
                      f"{r.get('shadow_in_flight', 0)} | {r.get('shadow_parked_bytes', 0) / 1e9:.2f} | "
                      f"{r.get('shadow_park_write_bytes', 0) / 1e9:.2f} / {r.get('shadow_park_read_bytes', 0) / 1e9:.2f} | "
                      f"{r.get('shadow_park_s', 0):.1f} | {r.get('shadow_jobs_in_memory', 0):.0f} |")
print(f"Steps 2..{steps} (step 1: every block's first eigendecomposition, synchronous in both):\n")
print("| run | step 1 s | mean s | median s | p95 s | max s | p95 / median | optim s (mean) | root jobs s (mean) | "
      "job store write / read GB per step | job store I/O s per step | peak RSS GiB |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
print("\n".join(rows))
print("\n".join(detail))
