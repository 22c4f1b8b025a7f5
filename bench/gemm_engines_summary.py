#!/usr/bin/python3
"""Summarizes bench/gemm_engines.sh's run directory into OUT/summary.md and OUT/summary.json.

usage: gemm_engines_summary.py WORK OUT STEPS ROUNDS
"""
import glob
import json
import os
import statistics
import sys

WORK, OUT, STEPS, ROUNDS = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
SKIP = 5  # warm-up steps left out of each run's median


def load_json(path, default=None):
    """A JSON file, or the last line of a file of JSON lines (a program's output)."""
    try:
        with open(path) as f:
            text = f.read().strip()
        try:
            return json.loads(text)
        except ValueError:
            return json.loads(text.splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return default


def metrics(run):
    with open(os.path.join(run, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def run_tokens_per_s(run):
    recs = metrics(run)[SKIP:]
    return statistics.median(r["tokens_per_s"] for r in recs)


def flops_per_token(run):
    return load_json(os.path.join(run, "run_info.json"))["flops_per_token"]


peak = load_json(os.path.join(WORK, "peak.json"), {})
peak_gflops = peak.get("peak_gflops", float("nan"))
sgemm = {g: load_json(os.path.join(WORK, f"sgemm-{g}.json"), {}) for g in ("openblas", "onednn", "auto", "bf16")}
sgemm_avx2 = {g: load_json(os.path.join(WORK, f"sgemm-avx2-{g}.json"), {}) for g in ("openblas", "onednn", "auto")}
blas = sgemm["auto"].get("blas", {})
gemm = sgemm["auto"].get("gemm", {})

# Training: median over rounds of each run's median tokens/s.
training = {}
for opt in ("adamw", "soap"):
    for s in ("openblas-fp32", "auto-fp32", "auto-bf16"):
        runs = sorted(glob.glob(os.path.join(WORK, f"{opt}-{s}-[0-9]*")))
        runs = [r for r in runs if os.path.isdir(r)]
        if not runs:
            continue
        tps = [run_tokens_per_s(r) for r in runs]
        fpt = flops_per_token(runs[0])
        training[f"{opt} {s}"] = {"tokens_per_s": statistics.median(tps), "rounds": tps,
                                  "gflops": statistics.median(tps) * fpt * 1e-9, "flops_per_token": fpt}
for g in ("openblas", "auto"):
    runs = [r for r in sorted(glob.glob(os.path.join(WORK, f"adamw-haswell-{g}-[0-9]*"))) if os.path.isdir(r)]
    if runs:
        tps = [run_tokens_per_s(r) for r in runs]
        training[f"adamw haswell-{g}"] = {"tokens_per_s": statistics.median(tps), "rounds": tps,
                                          "gflops": statistics.median(tps) * flops_per_token(runs[0]) * 1e-9}

torch = {}
for p in ("fp32", "bf16"):
    for cap in ("default", "avx512"):
        rs = [load_json(f) for f in sorted(glob.glob(os.path.join(WORK, f"torch-{p}-{cap}-[0-9]*.json")))]
        rs = [r for r in rs if r]
        if rs:
            torch[f"{p} {cap}"] = {"tokens_per_s": statistics.median(r["tokens_per_s"] for r in rs),
                                   "rounds": [r["tokens_per_s"] for r in rs], "last_loss": rs[-1]["last_loss"]}
torch_best = {}
for p in ("fp32", "bf16"):
    cands = {k: v for k, v in torch.items() if k.startswith(p)}
    if cands:
        k = max(cands, key=lambda k: cands[k]["tokens_per_s"])
        torch_best[p] = {"setup": k, **cands[k]}

demo = {}
for s in ("openblas-fp32", "auto-fp32", "auto-bf16"):
    run = os.path.join(WORK, f"demo-{s}")
    if not os.path.isdir(run):
        continue
    recs = metrics(run)
    evals = {r["step"]: r["eval_loss"] for r in recs if "eval_loss" in r}
    with open(os.path.join(WORK, f"demo-{s}.time")) as f:
        wall = float(f.read())
    demo[s] = {"wall_s": wall, "train_s": recs[-1]["elapsed_s"], "eval_loss": evals,
               "final_loss": recs[-1]["loss"]}

profiles = {}
for p in ("fp32", "bf16"):
    path = os.path.join(WORK, f"profile-{p}.txt")
    if os.path.exists(path):
        with open(path) as f:
            profiles[p] = [line.rstrip() for line in f if line.strip()]

summary = {"cpu": blas.get("cpu"), "cpu_features": blas.get("cpu_features"), "openblas_kernels": blas.get("openblas_corename"),
           "OPENBLAS_CORETYPE": blas.get("openblas_coretype_env"), "gemm": gemm, "fma_peak": peak,
           "sgemm_weighted_gflops": {g: v.get("weighted_gflops") for g, v in sgemm.items()},
           "sgemm_avx2_weighted_gflops": {g: v.get("weighted_gflops") for g, v in sgemm_avx2.items()},
           "training": training, "torch": torch, "torch_best": torch_best, "demo": demo,
           "steps": STEPS, "rounds": ROUNDS}
os.makedirs(OUT, exist_ok=True)
with open(os.path.join(OUT, "summary.json"), "w") as f:
    json.dump(summary, f, indent=1)


def fmt(x, d=0):
    return "-" if x is None or x != x else f"{x:,.{d}f}"


L = []
L.append(f"# runtime.gemm on {blas.get('cpu', '?')} ({blas.get('cpu_features', '')})\n")
L.append(f"`bench/gemm_engines.sh {STEPS} {ROUNDS}`: 2 threads; OpenBLAS {blas.get('openblas_corename')} kernels "
         f"(OPENBLAS_CORETYPE {blas.get('openblas_coretype_env')}); oneDNN {gemm.get('onednn')} with its "
         f"{gemm.get('onednn_isa')} kernels; runtime.gemm auto routes fp32 to: {gemm.get('fp32')}; bf16: {gemm.get('bf16')}.\n")
L.append(f"Measured fp32 FMA peak (bench_fma_peak, 2 threads): AVX2 {fmt(peak.get('avx2_gflops'))} GFLOP/s, "
         f"AVX-512 {fmt(peak.get('avx512_gflops'))} GFLOP/s; the fractions below are of {fmt(peak_gflops)}.\n")
L.append("## GEMMs at bench-small's shapes (bench_sgemm, FLOP-weighted)\n")
L.append("| library | GFLOP/s | of peak | vs OpenBLAS | on AVX2 kernels (Zen 3's case) |")
L.append("|---|---|---|---|---|")
base = sgemm["openblas"].get("weighted_gflops")
base2 = sgemm_avx2["openblas"].get("weighted_gflops")
for g in ("openblas", "onednn", "auto", "bf16"):
    w = sgemm[g].get("weighted_gflops")
    w2 = sgemm_avx2.get(g, {}).get("weighted_gflops")
    L.append(f"| {g if g != 'bf16' else 'oneDNN bf16 (linear shapes; attention fp32)'} | {fmt(w, 1)} | "
             f"{fmt(w / peak_gflops if w else None, 2)} | {fmt(w / base if w and base else None, 2)} | "
             f"{fmt(w2, 1) + ' (' + fmt(w2 / base2, 2) + 'x)' if w2 and base2 else '-'} |")
L.append("")
L.append(f"## bench-small training (median of {ROUNDS} interleaved rounds x {STEPS} steps, first {SKIP} skipped)\n")
L.append("| optimizer | runtime.gemm, precision | tokens/s | GFLOP/s | of peak | vs openblas fp32 |")
L.append("|---|---|---|---|---|---|")
for opt in ("adamw", "soap"):
    b = training.get(f"{opt} openblas-fp32", {}).get("tokens_per_s")
    for s in ("openblas-fp32", "auto-fp32", "auto-bf16"):
        t = training.get(f"{opt} {s}")
        if t:
            L.append(f"| {opt} | {s.replace('-', ', ')} | {fmt(t['tokens_per_s'])} | {fmt(t['gflops'], 1)} | "
                     f"{fmt(t['gflops'] / peak_gflops, 2)} | {fmt(t['tokens_per_s'] / b if b else None, 2)} |")
hb = training.get("adamw haswell-openblas", {}).get("tokens_per_s")
ha = training.get("adamw haswell-auto", {}).get("tokens_per_s")
if hb and ha:
    L.append(f"| adamw | OPENBLAS_CORETYPE=Haswell (as Zen 5's system sets it): openblas | {fmt(hb)} | "
             f"{fmt(training['adamw haswell-openblas']['gflops'], 1)} | {fmt(training['adamw haswell-openblas']['gflops'] / peak_gflops, 2)} | 1.00 |")
    L.append(f"| adamw | OPENBLAS_CORETYPE=Haswell: auto | {fmt(ha)} | {fmt(training['adamw haswell-auto']['gflops'], 1)} | "
             f"{fmt(training['adamw haswell-auto']['gflops'] / peak_gflops, 2)} | {fmt(ha / hb, 2)} |")
L.append("")
if torch_best:
    L.append("## Against PyTorch 1.13 at its best (bench-small AdamW, the same model and step)\n")
    L.append("PyTorch: tcmalloc, the OpenMP OpenBLAS on the same kernels, 2 threads, its fastest variant; "
             "its default and its AVX-512 ATen kernels (ATEN_CPU_CAPABILITY=avx512) tried, the faster kept; bf16 is "
             "`torch.autocast('cpu', torch.bfloat16)` (its oneDNN bf16 matmul).\n")
    L.append("| precision | PyTorch setup | PyTorch tokens/s | asteria tokens/s (auto) | asteria / PyTorch |")
    L.append("|---|---|---|---|---|")
    for p in ("fp32", "bf16"):
        tb = torch_best.get(p)
        a = training.get(f"adamw auto-{p}", {}).get("tokens_per_s")
        if tb:
            L.append(f"| {p} | {tb['setup']} | {fmt(tb['tokens_per_s'])} | {fmt(a)} | {fmt(a / tb['tokens_per_s'] if a else None, 2)} |")
    L.append("")
    L.append("All PyTorch setups tried: " + "; ".join(f"{k} {fmt(v['tokens_per_s'])}" for k, v in torch.items()) + "\n")
if demo:
    L.append("## The demo's training (bench-small AdamW, English corpus, 300 steps, eval every 50)\n")
    L.append("| runtime.gemm, precision | wall s | training s | vs openblas | eval loss at 50 / 150 / 300 |")
    L.append("|---|---|---|---|---|")
    b = demo.get("openblas-fp32", {}).get("train_s")
    for s, d in demo.items():
        ev = d["eval_loss"]
        L.append(f"| {s.replace('-', ', ')} | {fmt(d['wall_s'], 1)} | {fmt(d['train_s'], 1)} | "
                 f"{fmt(d['train_s'] / b if b else None, 2)} | "
                 + " / ".join(fmt(ev.get(k) or ev.get(str(k)), 4) for k in (50, 150, 300)) + " |")
    L.append("")
for p, lines in profiles.items():
    L.append(f"## Step profile, {p} (perf, bench-small AdamW, 30 steps, start-up included): by library, then by "
             "function ([JIT]: oneDNN's generated kernels, one entry per thread)\n")
    L.append("```")
    L.extend(lines)
    L.append("```\n")
with open(os.path.join(OUT, "summary.md"), "w") as f:
    f.write("\n".join(L))
print("\n".join(L))
