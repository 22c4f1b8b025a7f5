#!/usr/bin/env python3
"""FSDP cost model on paper (issue 12, "Benchmarks"): the collectives of one training step of a
model preset with SOAP on NODES x GPUS_PER_NODE GPUs, full vs hybrid sharding, in bytes and
seconds, against the step's compute time.

    /usr/bin/python3 bench/fsdp_cost_model.py                      # OLMo-7B, 16 x 4 GPUs, 200 Gb/s
    /usr/bin/python3 bench/fsdp_cost_model.py --out bench/results/fsdp/cost_model.md
    /usr/bin/python3 bench/fsdp_cost_model.py --json               # the figures, for tests

The model comes from the repository: the preset's numbers are read from src/model/presets.cpp,
and the per-layer parameter tables and shard layout are those of src/model/param_tables.cpp,
src/fsdp/shard_layout.cpp and src/optim/blocks.cpp (split_dimension), mirrored here line for
line (tests/bench/fsdp_cost_model_test.py checks the parameter count against
`asteria-train --dry-run`). The collectives are those of docs/DESIGN.md "The data flow of one
step": per micro-batch and layer, an all-gather before the forward and one before the backward
and a reduce-scatter of the gradient after the backward; hybrid adds an all-reduce of each
rank's gradient shard across the nodes; the global grad norm is one all-reduce. Where the SOAP
state is replicated, the coherence section adds the versions the blocks' owners ship between
nodes (hierarchical vs flat, staleness 1 and 5). Python 3 standard library only.
"""
import argparse
import json
import os
import re
import shlex
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---------------------------------------------------------------------------------------------
# The model: preset (presets.cpp), parameter tables (param_tables.cpp), shard layout
# (shard_layout.cpp + blocks.cpp).

def read_preset(name, source_dir):
    """The preset's ModelConfig fields, parsed from src/model/presets.cpp: either `c = olmoN(...)`
    (a helper's assignments with its arguments bound) or the fields assigned in the preset's own
    branch (the rest at ModelConfig's defaults, src/model/model_config.hpp)."""
    path = os.path.join(source_dir, "src", "model", "presets.cpp")
    text = open(path).read()
    branch = re.search(r'name == "%s"\)\s*\{(.*?)\n\s*\}' % re.escape(name), text, re.S)
    if not branch:
        sys.exit("fsdp_cost_model: preset '%s' not found in %s" % (name, path))
    cfg = {"norm": "NormKind::LayerNorm", "qk_norm": "false", "tied_embeddings": "true"}   # ModelConfig's defaults
    m = re.search(r"c = (\w+)\(([^)]*)\);", branch.group(1))
    if m:
        func, args = m.group(1), [a.strip() for a in m.group(2).split(",")]
        f = re.search(r"ModelConfig %s\(([^)]*)\)\s*\{(.*?)\n\}" % func, text, re.S)
        if not f:
            sys.exit("fsdp_cost_model: function %s not found in %s" % (func, path))
        params = [p.split()[-1] for p in f.group(1).split(",")]
        if len(params) != len(args):
            sys.exit("fsdp_cost_model: %s takes %d arguments, the preset gives %d" % (func, len(params), len(args)))
        bound = dict(zip(params, args))
        for field, value in re.findall(r"c\.(\w+) = ([^;]+);", f.group(2)):
            cfg[field] = bound.get(value.strip(), value.strip())
    for field, value in re.findall(r"c\.(\w+) = ([^;]+);", branch.group(1)):
        cfg[field] = value.strip()
    def num(k):
        if k not in cfg:
            sys.exit("fsdp_cost_model: preset '%s' sets no %s in %s" % (name, k, path))
        return int(cfg[k])
    def flag(k):
        return cfg[k] == "true"
    return {
        "preset": name,
        "d_model": num("d_model"),
        "n_layers": num("n_layers"),
        "n_heads": num("n_heads"),
        "mlp_hidden": num("mlp_hidden"),
        "vocab_size": num("vocab_size"),
        "embedding_size": num("embedding_size"),
        "seq_len": num("seq_len"),
        "rmsnorm": cfg["norm"] == "NormKind::RMSNorm",
        "qk_norm": flag("qk_norm"),
        "tied": flag("tied_embeddings"),
        "source": os.path.relpath(path, source_dir),
    }


def param_tables(m):
    """[(layer name, [(tensor, shape), ...])] in buffer order, as model_param_tables()."""
    C, F, E = m["d_model"], m["mlp_hidden"], m["embedding_size"]
    rms = m["rmsnorm"]
    tables = [("embed", [("wte", (E, C))])]
    for i in range(m["n_layers"]):
        p = "blocks.%d." % i
        t = []
        if rms:
            t.append((p + "att_norm", (C,)))
        t.append((p + "att_qkv", (3 * C, C)))
        if m["qk_norm"]:
            t += [(p + "q_norm", (C,)), (p + "k_norm", (C,))]
        t.append((p + "att_out", (C, C)))
        if rms:
            t.append((p + "mlp_norm", (C,)))
        t += [(p + "mlp_up", (2 * F, C)), (p + "mlp_down", (C, F))]
        tables.append(("blocks.%d" % i, t))
    head = []
    if rms:
        head.append(("norm_f", (C,)))
    if not m["tied"]:
        head.append(("lm_head", (E, C)))
    tables.append(("head", head))
    return tables


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def split_dimension(n, max_dim):
    """src/optim/blocks.cpp: near-equal chunks of at most max_dim."""
    chunks = (n + max_dim - 1) // max_dim
    out, begin = [], 0
    for c in range(chunks):
        size = n // chunks + (1 if c < n % chunks else 0)
        out.append((begin, size))
        begin += size
    return out


def shard_layer(table, max_dim, world):
    """src/fsdp/shard_layout.cpp shard_layer(): (begin[world + 1], largest part, numel)."""
    ends, offset = [], 0
    for _, shape in table:
        if len(shape) == 2:
            for r0, rn in split_dimension(shape[0], max_dim):
                ends.append(offset + (r0 + rn) * shape[1])
        else:
            ends.append(offset + numel(shape))
        offset += numel(shape)
    total = offset
    begin = [total] * (world + 1)
    begin[0] = 0
    u = 0
    for r in range(1, world):
        target = total * r / world
        end = begin[r - 1]
        while u < len(ends) and ends[u] <= target:
            end = ends[u]
            u += 1
        if u < len(ends) and ends[u] - target < target - end:
            end = ends[u]
            u += 1
        begin[r] = max(end, begin[r - 1])
    largest = max(1, max(begin[r + 1] - begin[r] for r in range(world)))
    return begin, largest, total


# ---------------------------------------------------------------------------------------------
# Collective costs: ring algorithms, alpha-beta model.

def ring_gatherv(n, total_bytes, smallest_part_bytes, alpha, bw):
    """All-gather or reduce-scatter of a buffer of total_bytes cut into n exact parts
    (all_gatherv: no padding) over a ring: each rank receives every part but its own, in n - 1
    steps of latency alpha; the busiest link carries the buffer less the smallest part.
    -> (bytes over the busiest link, seconds)."""
    b = total_bytes - smallest_part_bytes
    return b, (n - 1) * alpha + b / bw


def ring_all_reduce(n, data_bytes, alpha, bw):
    """All-reduce of data_bytes over a ring (reduce-scatter + all-gather): 2 (n - 1) / n of the
    data per link, 2 (n - 1) steps."""
    b = 2 * (n - 1) / n * data_bytes
    return b, 2 * (n - 1) * alpha + b / bw


def model_costs(a):
    m = read_preset(a.preset, a.source_dir)
    tables = param_tables(m)
    nodes, gpn = a.nodes, a.gpus_per_node
    world = nodes * gpn
    per_gpu_instances = a.global_batch / world
    if per_gpu_instances != int(per_gpu_instances) or int(per_gpu_instances) % a.micro_batch:
        sys.exit("fsdp_cost_model: global batch %d is not a multiple of %d GPUs x micro-batch %d"
                 % (a.global_batch, world, a.micro_batch))
    accum = int(per_gpu_instances) // a.micro_batch      # micro-batches per step per GPU
    tokens = a.global_batch * m["seq_len"]
    n_params = sum(numel(s) for _, t in tables for _, s in t)

    bw_intra = a.intra_gbs * 1e9 * a.intra_eff               # bytes/s per GPU, per direction
    bw_inter = a.inter_gbps / 8 * 1e9 * a.inter_eff * a.nics_per_node   # bytes/s per node, per direction
    al_intra, al_inter = a.alpha_intra_us * 1e-6, a.alpha_inter_us * 1e-6
    pbytes, gbytes = a.param_bytes, 4                        # gathered params (bf16), gradients (fp32)

    layers = []
    for name, t in tables:
        begin64, big_full, n = shard_layer(t, a.max_dim, world)
        begin4, big_node, _ = shard_layer(t, a.max_dim, gpn)
        layers.append({"name": name, "numel": n, "units": sum(len(split_dimension(s[0], a.max_dim)) if len(s) == 2 else 1
                                                             for _, s in t),
                       "largest_full": big_full, "largest_hybrid": big_node,
                       "smallest_full": min(begin64[r + 1] - begin64[r] for r in range(world)),
                       "smallest_hybrid": min(begin4[r + 1] - begin4[r] for r in range(gpn)),
                       "empty_ranks_full": sum(1 for r in range(world) if begin64[r + 1] == begin64[r])})

    rows = []

    def add(mode, op, group, link, dtype, calls_per_step, per_layer, note=""):
        """per_layer: [(bytes over the bottleneck link per call, seconds per call, NIC bytes per
        node per call, bytes sent per rank per call)] for each layer."""
        link_bytes = sum(x[0] for x in per_layer) * calls_per_step
        secs = sum(x[1] for x in per_layer) * calls_per_step
        nic = sum(x[2] for x in per_layer) * calls_per_step
        sent = sum(x[3] for x in per_layer) * calls_per_step
        rows.append({"mode": mode, "op": op, "group": group, "link": link, "dtype": dtype,
                     "calls_per_step_per_layer": calls_per_step, "layers": len(per_layer),
                     "sent_bytes_per_rank": sent, "nic_bytes_per_node": nic, "link_bytes": link_bytes,
                     "seconds": secs, "note": note,
                     "per_layer": [{"layer": L["name"], "sent_bytes_per_rank": x[3], "seconds": x[1]}
                                   for L, x in zip(layers, per_layer)]})

    gn_bytes = 8 * len(tables)   # one fp64 sum of squares per layer

    # Full: one shard group of all `world` ranks; its rings cross every node boundary, so the
    # node's NIC is the bottleneck link (each ring passes each node boundary once per direction).
    for op, dtype, nbytes, calls in (("all-gather (before forward)", "bf16" if pbytes == 2 else "fp32", pbytes, accum),
                                     ("all-gather (before backward)", "bf16" if pbytes == 2 else "fp32", pbytes, accum),
                                     ("reduce-scatter of gradients", "fp32", gbytes, accum)):
        per = []
        for L in layers:
            b, s = ring_gatherv(world, L["numel"] * nbytes, L["smallest_full"] * nbytes, al_inter, bw_inter)
            per.append((b, s, b, b))
        add("full", op, "%d ranks (all)" % world, "inter-node (NIC)", dtype, calls, per)
    b, s = ring_all_reduce(world, gn_bytes, al_inter, bw_inter)
    add("full", "grad-norm all-reduce", "%d ranks (all)" % world, "inter-node (NIC)", "fp64", 1, [(b, s, b, b)],
        "%d fp64 (one per layer), latency-bound" % len(tables))

    # Hybrid: shard groups of the gpus_per_node ranks of a node (NVLink); replicas across nodes.
    for op, dtype, nbytes, calls in (("all-gather (before forward)", "bf16" if pbytes == 2 else "fp32", pbytes, accum),
                                     ("all-gather (before backward)", "bf16" if pbytes == 2 else "fp32", pbytes, accum),
                                     ("reduce-scatter of gradients", "fp32", gbytes, accum)):
        per = []
        for L in layers:
            b, s = ring_gatherv(gpn, L["numel"] * nbytes, L["smallest_hybrid"] * nbytes, al_intra, bw_intra)
            per.append((b, s, 0, b))
        add("hybrid", op, "%d ranks (node)" % gpn, "intra-node (NVLink)", dtype, calls, per)
    # The inter-node all-reduce of each rank's reduced gradient shard, once per step (the shard is
    # accumulated over the micro-batches in fp32): the gpus_per_node ranks of a node run one ring
    # each (over the ranks with their local rank, one per node), all through the node's NIC. The
    # ranks of one ring hold the same range, so the all-reduce needs no padding: a node's NIC
    # carries 2 (nodes - 1) / nodes of the whole layer.
    per = []
    for L in layers:
        b_node, _ = ring_all_reduce(nodes, L["numel"] * gbytes, al_inter, bw_inter)
        s = 2 * (nodes - 1) * al_inter + b_node / bw_inter
        b_rank, _ = ring_all_reduce(nodes, L["largest_hybrid"] * gbytes, al_inter, bw_inter)
        per.append((b_node, s, b_node, b_rank))
    add("hybrid", "all-reduce of the gradient shard", "%d ranks (one per node) x %d" % (nodes, gpn),
        "inter-node (NIC)", "fp32", 1, per, "once per step, after the last micro-batch's reduce-scatter")
    b, s = ring_all_reduce(gpn, gn_bytes, al_intra, bw_intra)
    add("hybrid", "grad-norm all-reduce", "%d ranks (node)" % gpn, "intra-node (NVLink)", "fp64", 1, [(b, s, 0, b)],
        "over the shard group: after the inter-node all-reduce every replica holds the same gradient")

    flops_6pt = 6 * n_params * tokens
    compute_s = flops_6pt / (world * a.peak_tflops * 1e12 * a.mfu)
    non_embed = n_params - m["embedding_size"] * m["d_model"]
    flops_trainer = (6 * non_embed + 12 * m["n_layers"] * m["d_model"] * m["seq_len"]) * tokens

    totals = {}
    for mode in ("full", "hybrid"):
        rs = [r for r in rows if r["mode"] == mode]
        intra = sum(r["seconds"] for r in rs if r["link"].startswith("intra"))
        inter = sum(r["seconds"] for r in rs if r["link"].startswith("inter"))
        totals[mode] = {"intra_s": intra, "inter_s": inter, "comm_s": intra + inter,
                        "nic_bytes_per_node": sum(r["nic_bytes_per_node"] for r in rs),
                        "sent_bytes_per_rank": sum(r["sent_bytes_per_rank"] for r in rs),
                        # NVLink and the NIC are separate links and the comm lane overlaps compute:
                        # the step is at least the busiest of the three.
                        "step_lower_bound_s": max(compute_s, intra, inter)}
    # Hybrid with the inter-node all-reduce after every micro-batch instead of once per step.
    ar = next(r for r in rows if r["op"] == "all-reduce of the gradient shard")
    totals["hybrid_allreduce_every_microbatch_inter_s"] = ar["seconds"] * accum

    grad_nic = next(r for r in rows if r["op"] == "all-reduce of the gradient shard")["nic_bytes_per_node"]
    coherence = coherence_costs(a, tables, grad_nic, bw_inter, a.precondition_frequency)
    return {
        "model": m, "params": n_params, "layers": layers, "rows": rows, "totals": totals, "coherence": coherence,
        "setup": {"nodes": nodes, "gpus_per_node": gpn, "world": world, "global_batch": a.global_batch,
                  "micro_batch": a.micro_batch, "micro_batches_per_step": accum, "tokens_per_step": tokens,
                  "max_preconditioner_dim": a.max_dim, "param_bytes": pbytes,
                  "intra_bytes_per_s": bw_intra, "inter_bytes_per_s_per_node": bw_inter,
                  "alpha_intra_s": al_intra, "alpha_inter_s": al_inter,
                  "peak_flops": a.peak_tflops * 1e12, "mfu": a.mfu},
        "compute": {"flops_6PT": flops_6pt, "seconds": compute_s, "flops_trainer_formula": flops_trainer,
                    "seconds_trainer_formula": flops_trainer / (world * a.peak_tflops * 1e12 * a.mfu)},
    }


# ---------------------------------------------------------------------------------------------
# Coherence (src/runtime/coherence.hpp): where SOAP's state is replicated, each block's owner ships
# every adopted version (fp32 eigenbases Q_L, Q_R and their permutations, plus an 88 B control
# message per hop) to the block's other replicas.

def soap_blocks(tables, max_dim, precondition_embeddings=True):
    """[(rows, cols)] of every preconditioner block (src/optim/blocks.cpp): 2-D tensors cut by
    split_dimension on both sides; the embedding and LM head only when precondition_embeddings."""
    out = []
    for _, t in tables:
        for name, shape in t:
            if len(shape) != 2 or (not precondition_embeddings and name in ("wte", "lm_head")):
                continue
            for _, rn in split_dimension(shape[0], max_dim):
                for _, cn in split_dimension(shape[1], max_dim):
                    out.append((rn, cn))
    return out


def coherence_costs(a, tables, gradient_nic_bytes_per_node, bw_inter, period):
    """Inter-node coherence bytes per step, hierarchical vs flat, in hybrid (replicas: one per
    node) and none (every GPU a replica), at staleness 1 and 5, every block refreshed once per
    `period` steps (staggered: the same share every step)."""
    nodes, gpn = a.nodes, a.gpus_per_node
    version = sum(88 + 4 * (r * r + c * c + r + c) for r, c in soap_blocks(tables, a.max_dim))   # all blocks, once
    rows = []
    for mode, replicas_per_node in (("hybrid", 1), ("none", gpn)):
        for scheme in ("hierarchical", "flat"):
            # Hops between nodes per version: hierarchical once per other node; flat once per
            # replica on another node.
            hops = (nodes - 1) * (1 if scheme == "hierarchical" else replicas_per_node)
            for S in (1, 5):
                total = version * hops / period / S          # all nodes' sends, per step
                per_node = total / nodes                     # owners balanced over the nodes
                rows.append({"mode": mode, "scheme": scheme, "staleness": S, "inter_bytes_per_step": total,
                             "nic_bytes_per_node_per_step": per_node, "seconds_per_step": per_node / bw_inter,
                             "vs_gradient_traffic": per_node / gradient_nic_bytes_per_node})
    return {"version_bytes": version, "period": period, "rows": rows}


# ---------------------------------------------------------------------------------------------
# Report.

def gb(x):
    """Bytes, decimal units."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if x >= scale:
            return "%.2f %s" % (x / scale, unit)
    return "%d B" % x


def ms(x):
    """Seconds."""
    if x >= 1:
        return "%.2f s" % x
    if x >= 1e-3:
        return "%.1f ms" % (x * 1e3)
    return "%.0f us" % (x * 1e6)


def markdown(r, a, command):
    m, s, t, c = r["model"], r["setup"], r["totals"], r["compute"]
    L = r["layers"]
    blocks = [x for x in L if x["name"].startswith("blocks.")]
    b0 = blocks[0]
    out = []
    w = out.append
    w("# FSDP cost model: %s %s on %d nodes x %d GPUs, %g Gb/s between nodes" %
      (m["preset"], a.optimizer_label, s["nodes"], s["gpus_per_node"], a.inter_gbps))
    w("")
    w("Made by `%s` (Python 3 standard library; the model is read from the repository's sources)." % command)
    w("")
    w("## Model")
    w("")
    w("%s (%s): d_model %d, %d layers, %d heads, SwiGLU hidden %d, vocab %d padded to %d, seq %d, %s, %s "
      "head: %s parameters (%.3fB)." %
      (m["preset"], m["source"], m["d_model"], m["n_layers"], m["n_heads"], m["mlp_hidden"], m["vocab_size"],
       m["embedding_size"], m["seq_len"], "RMSNorm" if m["rmsnorm"] else "non-parametric LayerNorm",
       "tied" if m["tied"] else "untied", "{:,}".format(r["params"]), r["params"] / 1e9))
    w("")
    w("Shard layout (src/fsdp/shard_layout.cpp): a layer's flat buffer is cut into units, the row-blocks of "
      "its preconditioner blocks (max_preconditioner_dim %d) and whole 1-D tensors; each rank holds whole "
      "units. The collectives move exact counts (all_gatherv), so uneven parts cost no bytes; the largest "
      "part is the busiest rank's share of the optimizer work." % s["max_preconditioner_dim"])
    w("")
    w("| layer | parameters | units | largest part, full (%d ranks) | ranks with no unit, full | largest part, hybrid (%d) | largest / even share, full / hybrid |" % (s["world"], s["gpus_per_node"]))
    w("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    shown = [L[0], b0, L[-1]]
    for x in shown:
        name = x["name"] if x["name"] != "blocks.0" else "blocks.i (each of %d)" % len(blocks)
        w("| %s | {:,} | %d | {:,} | %d | {:,} | %.2fx / %.2fx |".format(x["numel"], x["largest_full"], x["largest_hybrid"]) %
          (name, x["units"], x["empty_ranks_full"], x["largest_full"] * s["world"] / x["numel"],
           x["largest_hybrid"] * s["gpus_per_node"] / x["numel"]))
    w("")
    w("## Assumptions")
    w("")
    w("- %d nodes x %d GPUs = %d ranks; hybrid: shard over the %d GPUs of a node, replicate across the %d "
      "nodes; full: shard over all %d." % (s["nodes"], s["gpus_per_node"], s["world"], s["gpus_per_node"],
                                            s["nodes"], s["world"]))
    w("- Between nodes: %g Gb/s per node%s (= %.1f GB/s per direction) at %.0f %% efficiency: %.2f GB/s per "
      "node per direction, shared by all the node's GPUs. Latency %g us per ring step." %
      (a.inter_gbps, " x %d NICs" % a.nics_per_node if a.nics_per_node > 1 else "", a.inter_gbps / 8 * a.nics_per_node,
       a.inter_eff * 100, s["inter_bytes_per_s_per_node"] / 1e9, a.alpha_inter_us))
    w("- In a node: NVLink 4 (H100 / H200 SXM: 18 links x 25 GB/s = %g GB/s per GPU per direction, 900 GB/s "
      "both ways) at %.0f %% efficiency: %.0f GB/s per GPU. Latency %g us per ring step." %
      (a.intra_gbs, a.intra_eff * 100, s["intra_bytes_per_s"] / 1e9, a.alpha_intra_us))
    w("- Ring algorithms: an all-gather or reduce-scatter of n parts of P bytes sends (n-1) P per rank, "
      "(n-1)/n of the gathered data, in n-1 steps; an all-reduce of D bytes 2(n-1)/n D in 2(n-1) steps. "
      "Time = steps x latency + bytes over the slowest link / its bandwidth. Full sharding's rings cross "
      "every node boundary, so the NIC is the slowest link (each ring passes it once per direction; "
      "several rings share it; the rings' NVLink hops carry the same bytes in its shadow, so full's "
      "NVLink column is empty).")
    w("- Precision (docs/DESIGN.md \"Precision\"): CUDA trains in bf16 with fp32 master weights and fp32 gradient "
      "reduction, so parameters are gathered in %s (%d bytes) and gradients reduce-scattered and all-reduced "
      "in fp32 (4 bytes); the grad norm is one fp64 per layer." % ("bf16" if s["param_bytes"] == 2 else "fp32",
                                                                   s["param_bytes"]))
    w("- Batch: no %s config ships; the olmo-1b-soap.yaml recipe is used: micro-batch %d, global batch %d "
      "instances x %d tokens = {:,} tokens per step (the OLMo papers' ~4M), so %d instances per GPU = %d "
      "micro-batches per step. SOAP max_preconditioner_dim %d (that config's; the SOAP default here is 10000)."
      .format(s["tokens_per_step"]) %
      (m["preset"], s["micro_batch"], s["global_batch"], m["seq_len"], s["global_batch"] // s["world"],
       s["micro_batches_per_step"], s["max_preconditioner_dim"]))
    w("- Collectives per step (docs/DESIGN.md \"The data flow of one step\"): per micro-batch and layer, an "
      "all-gather before the forward, one before the backward (every layer, the embedding and the "
      "last block too) and a reduce-scatter of the gradient after its backward; hybrid adds one "
      "all-reduce per layer of each rank's fp32 gradient shard across the nodes, once per step; one "
      "grad-norm all-reduce per step. SOAP adds no collective: every preconditioner block (its factors, "
      "eigenbases, moments) lives on one rank of the shard group, which steps it.")
    w("- Compute: 6 x parameters x tokens = %.3g FLOP per step on %d GPUs at %g TFLOP/s (H100 / H200 SXM "
      "dense bf16) and %.0f %% MFU: %s per step (the trainer's own count, 6 x non-embedding parameters + "
      "attention, %.3g FLOP: %s)." % (c["flops_6PT"], s["world"], a.peak_tflops, a.mfu * 100, ms(c["seconds"]),
                                        c["flops_trainer_formula"], ms(c["seconds_trainer_formula"])))
    w("")
    w("## Per step")
    w("")
    w("| mode | collective | group | link | dtype | calls per layer per step | sent per rank | over each node's NIC | seconds |")
    w("| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: |")
    for x in r["rows"]:
        w("| %s | %s | %s | %s | %s | %d | %s | %s | %s |" %
          (x["mode"], x["op"], x["group"], x["link"], x["dtype"], x["calls_per_step_per_layer"],
           gb(x["sent_bytes_per_rank"]), gb(x["nic_bytes_per_node"]) if x["nic_bytes_per_node"] else "-",
           ms(x["seconds"])))
    w("")
    w("| mode | NVLink s/step | NIC s/step | comm s/step (sum) | compute s/step | step >= (overlapped) | comm / compute |")
    w("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for mode in ("full", "hybrid"):
        x = t[mode]
        w("| %s | %s | %s | %s | %s | %s | %.2f |" % (mode, ms(x["intra_s"]) if x["intra_s"] else "-", ms(x["inter_s"]),
                                                     ms(x["comm_s"]),
                                                     ms(c["seconds"]), ms(x["step_lower_bound_s"]),
                                                     x["comm_s"] / c["seconds"]))
    w("")
    full_row = next(x for x in r["rows"] if x["mode"] == "full" and x["op"].startswith("all-gather (before f"))
    hyb_row = next(x for x in r["rows"] if x["mode"] == "hybrid" and x["op"].startswith("all-gather (before f"))
    f0 = full_row["per_layer"][1]
    h0 = hyb_row["per_layer"][1]
    w("One call, blocks.0's all-gather (the layer of {:,} elements x %d B less the smallest part): full %s, %s; "
      "hybrid %s, %s.".format(b0["numel"]) %
      (s["param_bytes"], gb(f0["sent_bytes_per_rank"]), ms(f0["seconds"]), gb(h0["sent_bytes_per_rank"]),
       ms(h0["seconds"])))
    w("")
    w("## Reading")
    w("")
    w("- Full sharding over %d ranks moves every gather and reduce-scatter through the 200 Gb/s NICs, "
      "%d times per step (%d micro-batches): %s of communication against %s of compute. Full sharding "
      "at this scale needs fewer micro-batches (a larger micro-batch) or hybrid. (A block layer has %d "
      "units for %d ranks: %d ranks hold none of it, which costs no bytes, only balance.)" %
      (s["world"], s["micro_batches_per_step"], s["micro_batches_per_step"], ms(t["full"]["comm_s"]),
       ms(c["seconds"]), b0["units"], s["world"], b0["empty_ranks_full"]))
    blk = [t for name, t in param_tables(m) if name == "blocks.0"][0]
    _, p10k_full, n10k = shard_layer(blk, 10000, s["world"])
    _, p10k_hyb, _ = shard_layer(blk, 10000, s["gpus_per_node"])
    w("- At SOAP's default max_preconditioner_dim 10000 a block layer has %d units, and the largest part "
      "grows to %.2fx (full) and %.2fx (hybrid) of an even share." % (sum(len(split_dimension(sh[0], 10000)) for _, sh in blk if len(sh) == 2),
                                              p10k_full * s["world"] / n10k, p10k_hyb * s["gpus_per_node"] / n10k))
    w("- Hybrid keeps the gathers and reduce-scatters on NVLink (%s per step) and sends each parameter's "
      "gradient across nodes once per step (the all-reduce of the shards, %s over the NIC): %.2f of the "
      "compute time, which the comm lane can hide. Done after every micro-batch instead, that all-reduce "
      "alone would take %s per step." %
      (ms(t["hybrid"]["intra_s"]), ms(t["hybrid"]["inter_s"]), t["hybrid"]["comm_s"] / c["seconds"],
       ms(t["hybrid_allreduce_every_microbatch_inter_s"])))
    w("- Hybrid's price is memory: each GPU holds 1/%d of the parameters, gradients and SOAP state instead "
      "of 1/%d (`asteria-train --config configs/olmo-1b-soap.yaml --set model.preset=%s --dry-run` "
      "gives the whole state)." % (s["gpus_per_node"], s["world"], m["preset"]))
    w("- Latency terms are small here: the largest is full sharding's grad-norm all-reduce over %d ranks, "
      "%s (a tree would take 2 log2(n) steps instead of 2(n-1))." %
      (s["world"], ms(next(x for x in r["rows"] if x["mode"] == "full" and x["op"].startswith("grad-norm"))["seconds"])))
    co = r["coherence"]
    w("")
    w("## Coherence: replicated SOAP state (runtime.coherence)")
    w("")
    w("Where the SOAP state is replicated, each block's owner ships every adopted version: its fp32 "
      "eigenbases and permutations, %s for all the model's blocks once, plus an 88 B control message "
      "per hop (src/runtime/coherence.hpp). Every block refreshes once per optim.precondition_frequency "
      "= %d steps (staggered, so the same share every step); at staleness S one version in S ships. "
      "hybrid: the replicas of a block are one GPU per node (%d); none (DDP): every GPU (%d), %d per node. "
      "Hierarchical shipping crosses each other node's boundary once per version, flat once per replica "
      "there. Next to it, hybrid's gradient all-reduce: %s over each node's NIC per step." %
      (gb(co["version_bytes"]), co["period"], s["nodes"], s["world"], s["gpus_per_node"],
       gb(next(x for x in r["rows"] if x["op"] == "all-reduce of the gradient shard")["nic_bytes_per_node"])))
    w("")
    w("| fsdp | scheme | staleness | between nodes per step (all nodes) | over each node's NIC | seconds | vs the gradient all-reduce |")
    w("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for x in co["rows"]:
        w("| %s | %s | %d | %s | %s | %s | %.3f |" % (x["mode"], x["scheme"], x["staleness"], gb(x["inter_bytes_per_step"]),
                                                      gb(x["nic_bytes_per_node_per_step"]), ms(x["seconds_per_step"]),
                                                      x["vs_gradient_traffic"]))
    w("")
    w("In hybrid the two schemes move the same inter-node bytes (a block has one replica per node); with "
      "replicas on every GPU (none) flat ships each version %d times across each node boundary and "
      "hierarchical once. S = 5 divides every figure by 5." % s["gpus_per_node"])
    return "\n".join(out) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="olmo-7b")
    p.add_argument("--optimizer-label", default="SOAP", help=argparse.SUPPRESS)
    p.add_argument("--source-dir", default=REPO, help="the repository (for src/model/presets.cpp)")
    p.add_argument("--nodes", type=int, default=16)
    p.add_argument("--gpus-per-node", type=int, default=4)
    p.add_argument("--inter-gbps", type=float, default=200, help="Gb/s between nodes, per NIC")
    p.add_argument("--nics-per-node", type=int, default=1)
    p.add_argument("--inter-eff", type=float, default=0.9, help="fraction of the NIC's line rate reached")
    p.add_argument("--intra-gbs", type=float, default=450, help="NVLink GB/s per GPU per direction")
    p.add_argument("--intra-eff", type=float, default=0.8)
    p.add_argument("--alpha-intra-us", type=float, default=5)
    p.add_argument("--alpha-inter-us", type=float, default=10)
    p.add_argument("--param-bytes", type=int, default=2, choices=(2, 4), help="gathered parameters: 2 bf16, 4 fp32")
    p.add_argument("--global-batch", type=int, default=2048, help="instances per step")
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--max-dim", type=int, default=2048, help="optim.max_preconditioner_dim")
    p.add_argument("--precondition-frequency", type=int, default=10, help="optim.precondition_frequency (steps)")
    p.add_argument("--peak-tflops", type=float, default=989, help="per GPU, dense bf16")
    p.add_argument("--mfu", type=float, default=0.4)
    p.add_argument("--json", action="store_true", help="print the figures as JSON instead of markdown")
    p.add_argument("--out", help="also write the markdown report to this file")
    a = p.parse_args()
    r = model_costs(a)
    if a.json:
        print(json.dumps(r, indent=1))
        return
    command = "/usr/bin/python3 bench/fsdp_cost_model.py " + " ".join(shlex.quote(x) for x in sys.argv[1:])
    text = markdown(r, a, command.strip())
    sys.stdout.write(text)
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
