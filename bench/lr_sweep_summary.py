#!/usr/bin/python3
"""Summary of bench/lr_sweep.sh from its per-run records: final eval loss per optimizer and lr,
each optimizer's best lr, steps and wall-clock of the best runs to reach AdamW's best final eval
loss (and the ratio to AdamW's), and a plot of eval loss vs wall-clock for the four best runs.
Runs in a mode other than the optimizer's sweep mode (MODE=native bench/lr_sweep.sh: a second-order
optimizer with synchronous refreshes) are a variant of their own, "soap native", beside "soap"; so
are runs with settings other than their config's (SET=), "kl-shampoo optim.kl_init_factor=0.1".

Wall-clock comes two ways. "own clock" is each run's elapsed time, which compares only between
runs on the same CPU with nothing else running. "timed" is steps x the mean step time of that
optimizer and mode in bench/flat_steps.sh, which measures all of them in one run on one machine;
the loss per step is independent of timing, so this is the comparison that survives a sweep
spread over sessions and machines.

usage: lr_sweep_summary.py OUT_DIR STEPS FLAT_STEPS_SUMMARY_JSON [SWEEP]   (SWEEP: the configs' family, bench-small)
"""
import json
import pathlib
import sys

out, steps, flat = pathlib.Path(sys.argv[1]), int(sys.argv[2]), pathlib.Path(sys.argv[3])
sweep = sys.argv[4] if len(sys.argv) > 4 else "bench-small"
def sweep_mode(opt):  # the mode bench/lr_sweep.sh runs an optimizer in unless MODE says otherwise
    return "native" if opt in ("adamw", "muon") else "asteria"

runs = {}  # variant ("soap", or "soap native" off its sweep mode) -> lr -> record
for f in sorted((out / "runs").glob("*.json")):
    r = json.loads(f.read_text())
    if r["steps"] == steps:
        variant = " ".join([r["optimizer"]] + ([r["mode"]] if r["mode"] != sweep_mode(r["optimizer"]) else [])
                           + ([r["settings"]] if r.get("settings") else []))
        runs.setdefault(variant, {})[r["lr"]] = r
runs = dict(sorted(runs.items()))   # variants beside their optimizer: "kl-shampoo", then "kl-shampoo native"
# The CPU the step times were measured on (the "cpu:" line of summary.txt beside the JSON).
flat_txt = flat.with_name("summary.txt")
flat_cpu = next((l[5:].strip() for l in flat_txt.read_text().splitlines() if l.startswith("cpu: ")),
                "CPU not recorded") if flat_txt.exists() else "CPU not recorded"
# bench/flat_steps.sh's runs by name, and their mean steps.
flat_runs = {r["run"]: r for r in json.loads(flat.read_text())["runs"]} if flat.exists() else {}
step_s = {k: r["step_time_mean_s"] for k, r in flat_runs.items()}

def timed_key(r):  # the run's name in bench/flat_steps.sh: adamw, soap-native, soap-asteria, ...
    return "adamw" if r["optimizer"] == "adamw" else f"{r['optimizer']}-{r['mode']}"

lines = [f"# lr sweep, {sweep}, {steps} steps (bench/lr_sweep.sh)", "",
         "| optimizer | mode | other settings | lr | final eval loss | final train loss | own mean step s | machine |",
         "|---|---|---|---|---|---|---|---|"]
best = {}
for opt, by_lr in runs.items():
    for lr, r in sorted(by_lr.items()):
        lines.append(f"| {r['optimizer']} | {r['mode']} | {r.get('settings') or '-'} | {lr:g} | {r['evals'][-1][2]:.4f} | "
                     f"{r['final_train_loss']:.4f} | {r['step_time_mean_s']:.2f} | {r['machine']} |")
    lr = min(by_lr, key=lambda k: by_lr[k]["evals"][-1][2])
    edge = " (grid edge)" if len(by_lr) > 1 and lr in (min(by_lr), max(by_lr)) else ""
    if len(by_lr) == 1:
        edge += " (the only lr run)"
    best[opt] = (lr, by_lr[lr], edge)

def reach(evals, target):  # first eval at or below target, interpolated in steps and time
    prev = None
    for s, t, loss in evals:
        if loss <= target:
            if prev is None:
                return s, t
            ps, pt, pl = prev
            a = (pl - target) / (pl - loss) if pl != loss else 1.0
            return ps + a * (s - ps), pt + a * (t - pt)
        prev = (s, t, loss)
    return None

summary = {}
lines += ["", "| optimizer | best lr | final eval loss | steps to AdamW's best | vs AdamW | "
          "timed s to it | vs AdamW | own-clock s to it | vs AdamW | step p95/median | mean step vs native |",
          "|---|---|---|---|---|---|---|---|---|---|---|"]
if "adamw" in best:
    target = best["adamw"][1]["evals"][-1][2]
    base = reach(best["adamw"][1]["evals"], target)
    base_timed = base[0] * step_s["adamw"] if "adamw" in step_s else None
    for opt, (lr, r, edge) in best.items():
        hit = reach(r["evals"], target)
        per = step_s.get(timed_key(r))
        timed = hit[0] * per if hit and per else None
        # The flat-step figures of this optimizer and mode: flatness, and its mean step against native's.
        flat_run, native = flat_runs.get(timed_key(r)), flat_runs.get(f"{r['optimizer']}-native")
        p95 = flat_run["p95_over_median"] if flat_run else None
        vs_native = flat_run["step_time_mean_s"] / native["step_time_mean_s"] if flat_run and native else None
        row = {"lr": lr, "mode": r["mode"], "final_eval_loss": r["evals"][-1][2],
               "steps_to_target": hit[0] if hit else None, "steps_vs_adamw": hit[0] / base[0] if hit else None,
               "timed_s_to_target": timed, "timed_vs_adamw": timed / base_timed if timed and base_timed else None,
               "own_clock_s_to_target": hit[1] if hit else None,
               "own_clock_vs_adamw": hit[1] / base[1] if hit else None,
               "step_p95_over_median": p95, "mean_step_vs_native": vs_native, "machine": r["machine"]}
        summary[opt] = row
        fmt = lambda v, f: "-" if v is None else format(v, f)
        lines.append(f"| {opt} | {lr:g}{edge} | {row['final_eval_loss']:.4f} | "
                     f"{fmt(row['steps_to_target'], '.0f') if hit else 'not reached'} | {fmt(row['steps_vs_adamw'], '.2f')} | "
                     f"{fmt(timed, '.0f')} | {fmt(row['timed_vs_adamw'], '.2f')} | "
                     f"{fmt(row['own_clock_s_to_target'], '.0f')} | {fmt(row['own_clock_vs_adamw'], '.2f')} | "
                     f"{fmt(p95, '.2f')} | {fmt(vs_native, '.3f')} |")
    lines += ["", f"Target: AdamW's best final eval loss, {target:.4f}. Timed step means (bench/flat_steps.sh, "
              f"{flat}, on {flat_cpu}): " + ", ".join(f"{k} {v:.3f} s" for k, v in sorted(step_s.items()))]
machines = sorted({r["machine"] for _, r, _ in best.values()})
lines.append("CPU of the best runs: " + "; ".join(machines))
if len(machines) > 1:
    lines.append("**The best runs ran on different CPUs: their own clocks do not compare; steps and timed seconds do.**")
(out / "summary.md").write_text("\n".join(lines) + "\n")
(out / "summary.json").write_text(json.dumps({"steps": steps, "best": summary}, indent=1) + "\n")
print("\n".join(lines))
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    # Timed where bench/flat_steps.sh measured every best run's step, else each run's own clock.
    timed_all = all(step_s.get(timed_key(r)) for _, r, _ in best.values())
    colors = {}
    for opt, (lr, r, _) in best.items():
        per = step_s.get(timed_key(r))
        xs = [s * per for s, _, _ in r["evals"]] if timed_all else [t for _, t, _ in r["evals"]]
        # Variants in their optimizer's colour: off the sweep mode (soap native) dashed, other settings dotted.
        color = colors.setdefault(r["optimizer"], f"C{len(colors)}")
        ls = ":" if r.get("settings") else "-" if opt == r["optimizer"] else "--"
        ax.plot(xs, [l for _, _, l in r["evals"]], color=color, ls=ls,
                label=f"{opt} (lr {lr:g})")
    if "adamw" in best:
        ax.axhline(best["adamw"][1]["evals"][-1][2], color="gray", lw=0.8, ls="--")
    ax.set_xlabel("wall-clock (s): steps x the step time of bench/flat_steps.sh" if timed_all
                  else "wall-clock (s): each run's own clock (no bench/flat_steps.sh figures yet)")
    ax.set_ylabel("eval loss")
    ax.set_title(f"{sweep}, best lr of each optimizer, {steps} steps")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "eval_vs_wallclock.png", dpi=120)
except ImportError:
    print("matplotlib missing: no plot")
