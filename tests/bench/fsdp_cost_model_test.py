#!/usr/bin/env python3
"""ctest bench.fsdp_cost_model: bench/fsdp_cost_model.py runs, its model is the repository's, and
its figures are the hand-computed ones.

    /usr/bin/python3 tests/bench/fsdp_cost_model_test.py bench/fsdp_cost_model.py [build/bin/asteria-train]

Hand computation (OLMo-7B, max_preconditioner_dim 2048, defaults of the script):
  blocks.i = att_qkv 12288 x 4096 + att_out 4096 x 4096 + mlp_up 22016 x 4096 + mlp_down 4096 x 11008
           = 202,375,168 parameters; 6 + 2 + 11 + 2 = 21 row-block units.
  hybrid (4 ranks): units end at 8,388,608 k (k <= 6), 58,720,256, 67,108,864, then mlp_up's
    (5 x 2002 + 6 x 2001 rows x 4096) and mlp_down's (2 x 2048 x 11008); the ranks end at the unit
    boundaries nearest to a quarter, a half and three quarters: 50,331,648, 99,909,632 and
    149,090,304, so the largest shard (rank 3) is 202,375,168 - 149,090,304 = 53,284,864 and the
    smallest (rank 2) 149,090,304 - 99,909,632 = 49,180,672.
    all-gather of one block layer in bf16 (exact counts: the busiest rank receives the layer less
    its own part): (202,375,168 - 49,180,672) x 2 = 306,388,992 B, in
    3 x 5 us + 306,388,992 / (450e9 x 0.8) s = 866.08 us.
  full (64 ranks): every unit is longer than 1/64 of the layer, so a rank holds one unit or none and
    the largest part is one row-block of mlp_down, 2048 x 11008 = 22,544,384; ranks with none
    receive the whole layer: 202,375,168 x 2 = 404,750,336 B, 63 x 10 us + 404,750,336 /
    (25e9 x 0.9) s = 18.6189 ms.
  hybrid inter-node all-reduce, once per step: each node's NIC carries 2 x 15/16 of every gradient in
    fp32: 2 x 15/16 x 6,888,095,744 x 4 = 51,660,718,080 B.
  compute: 6 x 6,888,095,744 x 2048 x 2048 / (64 x 989e12 x 0.4) = 6.8463 s.
"""
import json
import os
import re
import subprocess
import sys

script = sys.argv[1]
train = sys.argv[2] if len(sys.argv) > 2 else None
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def close(a, b, rel=1e-9):
    return abs(a - b) <= rel * abs(b)


r = json.loads(subprocess.run([sys.executable, script, "--json"], check=True, capture_output=True, text=True).stdout)
m = r["model"]
check((m["d_model"], m["n_layers"], m["n_heads"], m["mlp_hidden"], m["vocab_size"], m["embedding_size"], m["seq_len"],
       m["tied"], m["rmsnorm"]) == (4096, 32, 32, 11008, 50280, 50304, 2048, False, False),
      "olmo-7b preset as read from presets.cpp: %s" % m)
check(r["params"] == 6888095744, "parameters %d" % r["params"])
layers = {L["name"]: L for L in r["layers"]}
b0 = layers["blocks.0"]
check(b0["numel"] == 202375168 and b0["units"] == 21, "blocks.0: %s" % b0)
check(b0["largest_hybrid"] == 53284864, "blocks.0 largest part at 4 ranks: %d" % b0["largest_hybrid"])
check(b0["largest_full"] == 22544384, "blocks.0 largest part at 64 ranks: %d" % b0["largest_full"])
check(r["setup"]["micro_batches_per_step"] == 8, "micro-batches per step %d" % r["setup"]["micro_batches_per_step"])


def row(mode, op):
    return next(x for x in r["rows"] if x["mode"] == mode and x["op"].startswith(op))


h = row("hybrid", "all-gather (before forward)")["per_layer"][1]
check(h["layer"] == "blocks.0" and h["sent_bytes_per_rank"] == 306388992, "hybrid all-gather of blocks.0: %s" % h)
check(close(h["seconds"], 3 * 5e-6 + 306388992 / 360e9), "hybrid all-gather of blocks.0 seconds %r" % h["seconds"])
f = row("full", "all-gather (before backward)")["per_layer"][1]
check(f["sent_bytes_per_rank"] == 404750336, "full all-gather of blocks.0: %s" % f)
check(close(f["seconds"], 63 * 10e-6 + 404750336 / 22.5e9), "full all-gather of blocks.0 seconds %r" % f["seconds"])
ar = row("hybrid", "all-reduce of the gradient shard")
check(close(ar["nic_bytes_per_node"], 51660718080), "hybrid inter-node all-reduce NIC bytes %r" % ar["nic_bytes_per_node"])
rs = row("full", "reduce-scatter")
check(close(rs["sent_bytes_per_rank"], 2 * row("full", "all-gather (before forward)")["sent_bytes_per_rank"]),
      "fp32 reduce-scatter moves twice the bf16 all-gather's bytes")
check(close(r["compute"]["seconds"], 6 * 6888095744 * 2048 * 2048 / (64 * 989e12 * 0.4)),
      "compute seconds %r" % r["compute"]["seconds"])
# Every row's seconds are positive and finite, and hybrid needs less than full.
check(all(0 < x["seconds"] < 1e4 for x in r["rows"]), "seconds out of range")
check(r["totals"]["hybrid"]["comm_s"] < r["totals"]["full"]["comm_s"], "hybrid cheaper than full")

# The markdown report: every collective named, the hand figure printed.
md = subprocess.run([sys.executable, script], check=True, capture_output=True, text=True).stdout
for needle in ("all-gather (before forward)", "all-gather (before backward)", "reduce-scatter of gradients",
               "all-reduce of the gradient shard", "grad-norm all-reduce", "## Assumptions", "306.39 MB", "866 us",
               "6,888,095,744"):
    check(needle in md, "markdown lacks %r" % needle)

# The Python mirror of the parameter tables agrees with the trainer's own count.
if train:
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([train, "--config", os.path.join(src, "configs", "olmo-1b-soap.yaml"), "--set",
                          "model.preset=olmo-7b", "--dry-run"], capture_output=True, text=True, cwd=src)
    got = re.search(r"^total:\s+(\d+)", out.stdout, re.M)
    check(got is not None and int(got.group(1)) == r["params"],
          "asteria-train --dry-run counts %s parameters" % (got.group(1) if got else out.stdout + out.stderr))

# Coherence: per step, hierarchical crosses each other node's boundary once per version, flat once
# per replica there (hybrid: 1 per node, none: 4); staleness 5 ships one version in 5.
co = {(x["mode"], x["scheme"], x["staleness"]): x["inter_bytes_per_step"] for x in r["coherence"]["rows"]}
v = r["coherence"]["version_bytes"]
check(close(co[("hybrid", "hierarchical", 1)], v * 15 / 10), "hybrid hierarchical S=1: %g, want %g" % (co[("hybrid", "hierarchical", 1)], v * 1.5))
check(close(co[("hybrid", "flat", 1)], co[("hybrid", "hierarchical", 1)]), "hybrid: flat = hierarchical")
check(close(co[("none", "flat", 1)], 4 * co[("none", "hierarchical", 1)]), "none: flat = 4 x hierarchical")
check(close(co[("none", "hierarchical", 5)] * 5, co[("none", "hierarchical", 1)]), "staleness 5 ships a fifth")
# The versions by hand, each block 88 + 4 (r^2 + c^2 + r + c) bytes: a block layer has att_qkv 6 x 2
# blocks of 2048 x 2048, att_out 2 x 2, mlp_up 11 x 2 (5 of 2002 rows, 6 of 2001) x 2048 cols,
# mlp_down 2 x 6 (4 of 1835 cols, 2 of 1834); wte and lm_head 25 x 2 each (4 of 2013 rows, 21 of
# 2012) x 2048 cols.
def blk(r, c):
    return 88 + 4 * (r * r + c * c + r + c)
layer = 12 * blk(2048, 2048) + 4 * blk(2048, 2048) + 2 * (5 * blk(2002, 2048) + 6 * blk(2001, 2048)) \
    + 2 * (4 * blk(2048, 1835) + 2 * blk(2048, 1834))
embed = 2 * (4 * blk(2013, 2048) + 21 * blk(2012, 2048))
check(v == 32 * layer + 2 * embed, "the model's version bytes %d, by hand %d" % (v, 32 * layer + 2 * embed))

print("%d failure(s)" % len(failures) if failures else "ok: fsdp cost model figures match the hand computation")
sys.exit(1 if failures else 0)
