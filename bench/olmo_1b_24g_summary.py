#!/usr/bin/python3
"""Summary of bench/olmo_1b_24g.sh: per optimizer, peak RSS against the --dry-run estimate, the
step split, disk bytes and throughput against dd, and the native-mode refusal.

usage: olmo_1b_24g_summary.py OUT_DIR RAW_DIR STEPS "OPTIMIZERS"
"""
import json, pathlib, re, sys
out, raw, steps, opts = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split()
GiB = 1 << 30
def rate(name):  # dd's figure in bytes/s
    v, unit = (raw / name).read_text().split()
    return float(v.replace(",", ".")) * (1e9 if unit.startswith("G") else 1e6)
dd_w, dd_r = rate("dd_write.txt"), rate("dd_read.txt")
print("# OLMo-1B on one 24 GiB machine: bench/olmo_1b_24g.sh", steps)
print()
print("```\n" + (raw / "env.txt").read_text().strip() + f"\ndd (O_DIRECT, 4 GiB): write {dd_w/1e9:.2f} GB/s, read {dd_r/1e9:.2f} GB/s\n```")
for opt in opts:
    recs = [json.loads(l) for l in (raw / opt / "metrics.jsonl").read_text().splitlines() if l.strip()]
    dry = (raw / f"{opt}.dry-run.txt").read_text()
    est = re.search(r"in memory:\s+([0-9.]+) GiB", dry).group(1)
    timed = re.search(r"Maximum resident set size \(kbytes\): (\d+)", (raw / f"{opt}.time").read_text())
    metric_peak = max(max(r["peak_rss_bytes"]) for r in recs)
    hwm = int(timed.group(1)) * 1024 if timed else metric_peak   # the run still going: the metrics' figure
    sampled = max((int(l.split()[1]) for l in (raw / f"{opt}.rss").read_text().splitlines()), default=0) * 1024
    native = (raw / f"{opt}.native.txt").read_text().strip().splitlines()[-1]
    print(f"\n## {opt}: configs/olmo-1b-{opt}.yaml (runtime.placement auto)\n")
    print(f"peak RSS: {hwm/GiB:.2f} GiB (VmHWM; sampled VmRSS max {sampled/GiB:.2f} GiB); --dry-run estimate "
          f"{est} GiB (peak / estimate {hwm/GiB/float(est):.3f})\n")
    print("| step | loss | step s | fwd s | recompute s | bwd s | optim s | tier stall s | root jobs s | disk read GB | disk write GB | tier staging s | disk GB/s (vs dd time) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in recs:
        moved = r.get("tier_moved_bytes", {})
        rd, wr = moved.get("disk_to_device", 0), moved.get("device_to_disk", 0)
        staging = r.get("tier_staging_s", 0)
        dd_time = rd / dd_r + wr / dd_w
        eff = f"{(rd + wr) / staging / 1e9:.2f} ({dd_time / staging:.2f} of dd)" if staging > 0 else "-"
        print(f"| {r['step']} | {r['loss']:.4f} | {r['step_time_s']:.1f} | {r['fwd_s']:.1f} | {r.get('recompute_s', 0):.1f} | "
              f"{r['bwd_s']:.1f} | {r['optim_s']:.1f} | {r.get('tier_stall_s', 0):.2f} | {r.get('root_jobs_s', 0):.1f} | "
              f"{rd/1e9:.2f} | {wr/1e9:.2f} | {staging:.1f} | {eff} |")
    print(f"\nnative mode (runtime.mode=native, tier budgets unlimited): `{native}`")
