#!/usr/bin/python3
"""One finished lr-sweep run, reduced to what the summary needs (committed, so the sweep can span
sessions): the eval curve (step, elapsed s, eval loss), the final train loss, the run's own step
times and the machine it ran on. Refuses a run that did not finish its steps.

usage: lr_sweep_record.py METRICS_JSONL RECORD_JSON OPTIMIZER LR MODE STEPS MACHINE COMMIT [SETTINGS]
(SETTINGS: the run's settings other than its config's and the sweep's, "KEY=VALUE ...")
"""
import datetime
import json
import pathlib
import statistics
import sys

metrics, record, opt, lr, mode, steps, machine, commit = sys.argv[1:9]
settings = sys.argv[9] if len(sys.argv) > 9 else ""
rows = [json.loads(l) for l in pathlib.Path(metrics).read_text().splitlines() if l.strip()]
train = [r for r in rows if "loss" in r and "step_time_s" in r]
if len(train) < int(steps):
    sys.exit(f"lr_sweep_record: {metrics} has {len(train)} of {steps} steps: not recorded")
times = [r["step_time_s"] for r in train]
pathlib.Path(record).write_text(json.dumps({
    "optimizer": opt, "lr": float(lr), "mode": mode, "steps": int(steps), "settings": settings,
    "evals": [[r["step"], round(r["elapsed_s"], 2), r["eval_loss"]] for r in rows if "eval_loss" in r],
    "final_train_loss": train[-1]["loss"],
    "step_time_mean_s": statistics.fmean(times), "step_time_median_s": statistics.median(times),
    "machine": machine, "commit": commit,
    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
}, indent=1) + "\n")
