#!/usr/bin/env python3
"""Summary of a bench/torch_variants.sh run from its raw JSON lines (one per torch_bench_small.py run).

    summarize_torch_variants.py RAW.jsonl          stage 1 scores and the stage 2 table
    summarize_torch_variants.py RAW.jsonl --best   only the best stage 1 variant's name

Stage 1 score = tokens/s relative to the mean of its round (the variants of one round ran
step-interleaved in one process, so load from other users cancels out of the ratio). Stage 2:
median tokens/s over rounds of each process setup.
"""
import collections
import json
import statistics
import sys

recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rounds = collections.defaultdict(dict)
for j in recs:
    if j["tag"].startswith("stage1"):
        rounds[j["tag"]][j["variant"]] = j["tokens_per_s"]
score = collections.defaultdict(list)
for vs in rounds.values():
    mean = sum(vs.values()) / len(vs)
    for v, t in vs.items():
        score[v].append(t / mean)
best = max(score, key=lambda v: statistics.median(score[v])) if score else None
if "--best" in sys.argv[2:]:
    print(best)
    sys.exit(0)

print(f"stage 1: in-process variants, {len(rounds)} rounds (score = tokens/s / mean of its round)")
for v in sorted(score, key=lambda v: -statistics.median(score[v])):
    print(f"  {v:28s} relative score {statistics.median(score[v]):.3f}")
print(f"best in-process variant: {best}")
runs = collections.defaultdict(list)
for j in recs:
    if j["tag"].startswith("stage2"):
        key = j["tag"].split(" ", 2)[0] + " " + j["variant"] + " " + " ".join(j["tag"].split(" ")[2:])
        runs[key].append(j)
if runs:
    print("stage 2: process setups")
    print(f"{'setup':75s} {'tok/s med':>9s} {'(runs)':>24s} fwd_s  bwd_s  optim_s")
    for k, v in runs.items():
        tps = [j["tokens_per_s"] for j in v]
        print(f"{k:75s} {statistics.median(tps):9.0f} {str([round(x) for x in tps]):>24s} "
              f"{statistics.median(j['fwd_s'] for j in v):.3f}  {statistics.median(j['bwd_s'] for j in v):.3f}  "
              f"{statistics.median(j['optim_s'] for j in v):.3f}")
if recs:
    j = recs[0]
    print(f"torch {j.get('torch')}, threads {j.get('threads')}, params {j.get('params')}, "
          f"tokens/step {j.get('tokens_per_step')}, steps measured {j.get('steps_measured')} (+{j.get('warmup_steps')} warm-up)")
