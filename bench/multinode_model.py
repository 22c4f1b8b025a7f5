#!/usr/bin/env python3
"""The step-time model of a multi-node run (issue 31): the trainer's own plan, simulated on its
lanes with durations from the FSDP cost model (bench/fsdp_cost_model.py), checked against the
runs of bench/multinode.sh on namespace hosts, then used to project OLMo-7B SOAP to 16, 64 and
256 nodes.

    /usr/bin/python3 bench/multinode_model.py check RUNS_JSON OUT_DIR   # runs: bench/multinode.sh's
    /usr/bin/python3 bench/multinode_model.py project OUT_DIR [--shipped-fraction F]

The plan is `asteria-train --print-plan` of a step (every op with its lane and dependencies, in
plan order). Each lane runs its ops in plan order; an op starts when its lane is free and its
dependencies have ended. So the model sees what the real step does: the gathers ahead of the
forward, each layer's gradient reduction after its backward, clip_grads waiting for all of
them, the coherence syncs and the refresh parts placed after the last backward, the optimizer
after clip. Durations:
  - compute ops (forward, backward, optim_step, root_jobs): `check` splits the step's measured
    seconds of each kind (an unshaped run of the same layout) over the layers by their FLOPs;
    `project` takes them from the cost model's GPU compute (6 x parameters x tokens at the MFU)
    and SOAP's per-step GEMMs;
  - comm ops: the bytes each host's link carries for that collective, from the layer sizes
    (exact counts, as the code sends them), over the link's rate; collectives inside a host
    over the host's own rate.
The step is the compute lane's end, plus (check) what the measured run spent outside these ops.
Python 3 standard library (and matplotlib for the projection's plot).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fsdp_cost_model as fcm  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINE = re.compile(r"^\s*(\d+)\s+(compute|comm|staging|host)\s+(\S+)\s+(\S+)\s*(.*)$")


def plan_ops(train, config, sets, step):
    """The ops of `step`'s plan: dicts with id, lane, kind, layer, deps, block, parts."""
    args = [train, "--config", config, "--print-plan", "--plan-step", str(step)]
    for s in sets:
        args += ["--set", s]
    out = subprocess.run(args, capture_output=True, text=True, cwd=REPO)
    if out.returncode != 0:
        sys.exit("multinode_model: %s failed:\n%s" % (" ".join(args), out.stderr))
    ops = []
    for line in out.stdout.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        rest = m.group(5)
        after = re.search(r"after=([\d,]+)", rest)
        block = re.search(r"block=(\d+)", rest)
        micro = re.search(r"micro=(\d+)", rest)
        ops.append({"id": int(m.group(1)), "lane": m.group(2), "kind": m.group(3), "layer": m.group(4),
                    "micro": int(micro.group(1)) if micro else -1,
                    "deps": [int(d) for d in after.group(1).split(",")] if after else [],
                    "block": int(block.group(1)) if block else -1,
                    "parts": sum(int(b) - int(a) + 1 for a, b in re.findall(r"\[parts (\d+)-(\d+)\]", rest))})
    return ops


def simulate(ops, duration):
    """Runs the lanes: returns (end of the compute lane, its idle seconds waiting on other lanes)."""
    end, free = {}, {}
    waited = 0.0
    for op in ops:
        lane = op["lane"]
        ready = max([end[d] for d in op["deps"]] + [0.0])
        start = max(free.get(lane, 0.0), ready)
        if lane == "compute":
            waited += start - free.get(lane, 0.0)
        end[op["id"]] = start + duration(op)
        free[lane] = end[op["id"]]
    return free.get("compute", 0.0), waited


# ---------------------------------------------------------------------------------------------
# Layer weights and bytes, from the cost model's tables.

def layer_facts(m, max_dim, precondition_embeddings, tokens_per_micro, batch_per_micro):
    """Per layer: parameters, forward FLOPs per micro-batch, SOAP's per-step optimizer FLOPs,
    and the version bytes of its preconditioner blocks."""
    facts = {}
    T, C = m["seq_len"], m["d_model"]
    for name, table in fcm.param_tables(m):
        n = sum(fcm.numel(s) for _, s in table)
        if name == "embed":
            flops = 0.0                                   # a lookup
        elif name == "head":
            flops = 2.0 * C * m["embedding_size"] * tokens_per_micro
        else:
            flops = 2.0 * n * tokens_per_micro + 2.0 * T * T * C * batch_per_micro   # causal attention
        blocks = fcm.soap_blocks([(name, table)], max_dim, precondition_embeddings)
        # SOAP per step and block (r x c): the gradient into the bases and back (4 GEMMs) and the
        # two factor updates, about 6 rc (r + c); AdamW's elementwise work is noise beside it.
        optim = sum(6.0 * r * c * (r + c) for r, c in blocks) + 10.0 * n
        version = sum(88 + 4 * (r * r + c * c + r + c) for r, c in blocks)
        facts[name] = {"numel": n, "flops": flops, "optim_flops": optim, "version_bytes": version}
    return facts


def split(total, weights, key):
    """total spread over the ops by weights[op's layer][key]."""
    s = sum(weights[k][key] for k in weights)
    return {k: total * weights[k][key] / s if s else 0.0 for k in weights}


# ---------------------------------------------------------------------------------------------
# check: the runs of bench/multinode.sh.

LAYOUTS = {"2x1": (2, 1), "2x2": (2, 2)}


def link_bytes(op, fsdp, hosts, per_host, numel):
    """(bytes over a host's link to the other hosts, bytes inside the host) of one comm op, for
    2 hosts: the busiest host's share, as the trainer's rings move it (Open MPI's ring all-reduce,
    which MpiSession selects, and the ring reduce-scatter of src/comm/mpi_communicator.cpp)."""
    world = hosts * per_host
    D = numel * 4.0
    kind = op["kind"]
    if kind == "all_reduce":             # fsdp none: all ranks are replicas
        if per_host == 1:
            return 2 * (world - 1) / world * D, 0.0
        # A ring over the ranks in host order crosses each host's boundary once per direction.
        return 2 * (world - 1) / world * D, 2 * (world - 1) / world * D
    if fsdp == "full":                   # one group of all ranks: the ring crosses the hosts
        return (world - 1) / world * D, (world - 1) / world * D * (per_host - 1)
    # hybrid: the shard group is the host; the reduce-scatter is followed by the all-reduce of
    # each rank's shard across the hosts (all the host's ranks through its link: the whole layer).
    intra = (per_host - 1) / per_host * D if per_host > 1 else 0.0
    if kind == "reduce_scatter":
        return 2 * (hosts - 1) / hosts * D, intra
    return 0.0, intra                    # gather


def check(a):
    runs = json.load(open(a.runs))
    model = runs["link_model"]
    links = runs["links"]                # measured TCP rates, bytes/s per direction
    m = fcm.read_preset("bench-small", REPO)
    rows = []
    for layout, (hosts, per_host) in LAYOUTS.items():
        world = hosts * per_host
        micro = 8 // world
        facts = layer_facts(m, 1024, False, micro * m["seq_len"], micro)
        for fsdp in ("full", "hybrid", "none"):
            sets = ["distributed.world_size=%d" % world, "distributed.ranks_per_node=%d" % per_host,
                    "distributed.fsdp=%s" % fsdp, "runtime.mode=asteria", "train.micro_batch=%d" % micro,
                    "runtime.threads=%d" % runs["threads"], "train.warmup_steps=0"]
            base = runs["runs"]["%s-%s-unshaped" % (layout, fsdp)]
            for link in ("unshaped", "shaped"):
                meas = runs["runs"]["%s-%s-%s" % (layout, fsdp, link)]
                rate = links[link]
                steps, preds, waits, coh_bytes, busy = range(11, 21), [], [], [], []
                plans = [plan_ops(a.train, os.path.join(REPO, "configs/bench-small-soap.yaml"), sets, s) for s in steps]
                parts = [sum(op["parts"] for op in p if op["kind"] == "root_jobs") for p in plans]
                mean_parts = statistics.mean(parts) or 1
                fwd = split(base["fwd_s"], facts, "flops")
                bwd = split(base["bwd_s"], facts, "flops")
                opt = split(base["optim_s"], facts, "optim_flops")
                # The versions shipped per step (S = 1): every block once per period, the owners
                # balanced over the hosts; hierarchical shipping crosses to the other host once.
                period = 10
                version = sum(f["version_bytes"] for f in facts.values())
                for plan in plans:
                    syncs = [op for op in plan if op["kind"] == "coherence_sync"]
                    per_sync = (version / period / hosts) / len(syncs) if syncs else 0.0

                    def duration(op):
                        k = op["kind"]
                        if k == "forward":
                            return fwd[op["layer"]]
                        if k == "backward":
                            return bwd[op["layer"]]
                        if k == "optim_step":
                            return opt[op["layer"]]
                        if k == "root_jobs":
                            return base["root_jobs_s"] * op["parts"] / mean_parts
                        if k == "coherence_sync":
                            return per_sync / rate + runs["latency_s"]
                        if op["lane"] == "comm":
                            inter, intra = link_bytes(op, fsdp, hosts, per_host, facts[op["layer"]]["numel"])
                            return inter / rate + intra / links["intra"] + runs["latency_s"]
                        return 0.0
                    end, waited = simulate(plan, duration)
                    preds.append(end)
                    waits.append(waited)
                    busy.append(sum(duration(op) for op in plan if op["lane"] == "comm"))
                    coh_bytes.append(per_sync * len(syncs) * hosts)
                other = base["step_s"] - (base["fwd_s"] + base["bwd_s"] + base["optim_s"] + base["root_jobs_s"]
                                          + base["comm_wait_s"])
                pred = statistics.mean(preds) + other
                # Bytes per rank per step, as the trainer counts them (Sharding::take_bytes): what
                # a rank receives, the layer less its own part, for a gather or reduce-scatter in
                # the shard group; 2 (n - 1) / n of its part for an all-reduce over n replicas.
                group = per_host if fsdp == "hybrid" else world if fsdp == "full" else 1
                replicas = world // group
                sent = 0.0
                for op in plans[0]:
                    if op["lane"] != "comm" or op["kind"] == "coherence_sync":
                        continue
                    D = facts[op["layer"]]["numel"] * 4.0
                    if op["kind"] in ("gather", "reduce_scatter") and group > 1:
                        sent += (group - 1) / group * D
                    if op["kind"] in ("reduce_scatter", "all_reduce") and replicas > 1:
                        sent += 2 * (replicas - 1) / replicas * D / group
                r = {"layout": layout, "fsdp": fsdp, "link": link,
                     "step_measured_s": meas["step_s"], "step_lanes_s": pred, "step_predicted_s": pred,
                     "comm_busy_s": statistics.mean(busy),
                     "compute_s": sum(meas[k] for k in ("fwd_s", "bwd_s", "optim_s", "root_jobs_s")),
                     "wait_measured_s": meas["comm_wait_s"], "wait_predicted_s": statistics.mean(waits),
                     "bytes_measured": meas["group_bytes"] + meas["replica_bytes"],
                     "bytes_predicted": sent,
                     "coherence_measured": meas["coherence_inter_bytes"],
                     "coherence_predicted": statistics.mean(coh_bytes) if fsdp != "full" else 0.0}
                rows.append(r)
    # The network stack runs on the compute's cores here (2 cores for every host): while the link
    # is busy, compute slows. One factor, compute seconds lost per second of link activity beyond
    # the unshaped run's, fitted on 2 x 1 hybrid alone and applied to every other run.
    by = {(r["layout"], r["fsdp"], r["link"]): r for r in rows}
    fit_s, fit_u = by[("2x1", "hybrid", "shaped")], by[("2x1", "hybrid", "unshaped")]
    cpu = (fit_s["compute_s"] - fit_u["compute_s"]) / (fit_s["comm_busy_s"] - fit_u["comm_busy_s"])
    for r in rows:
        u = by[(r["layout"], r["fsdp"], "unshaped")]
        r["step_predicted_s"] = r["step_lanes_s"] + cpu * (r["comm_busy_s"] - u["comm_busy_s"])
    L = ["# The step-time model against the runs on hosts", "",
         "`/usr/bin/python3 bench/multinode_model.py check %s %s` on the runs of `bench/multinode.sh` (summary.json):" % (a.runs, a.out),
         "the trainer's plan of steps 11-20 (`--print-plan`) run on its lanes, compute from the same layout's",
         "unshaped run, comm from the layer sizes over the measured link rates (TCP between the hosts: %.0f Mbit/s shaped," % (links["shaped"] * 8 / 1e6),
         "%.0f Mbit/s unshaped; %.1f GB/s inside a host, assumed). Bytes per rank per step as the trainer counts them." % (links["unshaped"] * 8 / 1e6, links["intra"] / 1e9),
         "The lanes alone miss that this machine's network stack runs on the ranks' cores: compute slows while the link is",
         "busy. One factor covers it, %.2f s of compute lost per s of link activity beyond the unshaped run's, fitted on" % cpu,
         "2 x 1 hybrid alone (its compute, fwd + bwd + optim + root_jobs, shaped against unshaped) and applied to the others.", "",
         "| hosts x ranks | fsdp | link | step measured (s) | lanes only (s) | step predicted (s) | predicted / measured | comm wait measured / predicted (s) | bytes per rank measured / predicted (MB) | coherence between hosts measured / predicted (MB) |",
         "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        L.append("| %s | %s | %s | %.3f | %.3f | %.3f | %.2f | %.3f / %.3f | %.1f / %.1f | %.2f / %.2f |" % (
            r["layout"], r["fsdp"], r["link"], r["step_measured_s"], r["step_lanes_s"], r["step_predicted_s"],
            r["step_predicted_s"] / r["step_measured_s"], r["wait_measured_s"], r["wait_predicted_s"],
            r["bytes_measured"] / 1e6, r["bytes_predicted"] / 1e6, r["coherence_measured"] / 1e6,
            r["coherence_predicted"] / 1e6))
    shaped = [r for r in rows if r["link"] == "shaped"]
    within = [r for r in shaped if abs(r["step_predicted_s"] / r["step_measured_s"] - 1) <= 0.2]
    worst = max(abs(r["step_predicted_s"] / r["step_measured_s"] - 1) for r in shaped)
    L += ["", "Shaped links: %d of %d runs predicted within 20 %% (the target); largest error %.0f %%." % (
        len(within), len(shaped), 100 * worst)]
    os.makedirs(a.out, exist_ok=True)
    open(os.path.join(a.out, "model_check.md"), "w").write("\n".join(L) + "\n")
    json.dump(rows, open(os.path.join(a.out, "model_check.json"), "w"), indent=1)
    print("\n".join(L))


# ---------------------------------------------------------------------------------------------
# project: OLMo-7B SOAP, hybrid, on 16 / 64 / 256 nodes x 4 GH200.

def project(a):
    m = fcm.read_preset("olmo-7b", REPO)
    gpn, global_batch, max_dim, period = 4, 2048, 2048, 10
    peak, mfu = 989e12, 0.4
    bw_inter, bw_intra = 200e9 / 8 * 0.9, 450e9 * 0.8
    al_inter, al_intra = 10e-6, 5e-6
    rows = []
    for nodes in a.nodes:
        world = nodes * gpn
        per_gpu = global_batch // world
        micro = min(4, per_gpu)
        accum = per_gpu // micro
        facts = layer_facts(m, max_dim, True, micro * m["seq_len"], micro)
        sets = ["model.preset=olmo-7b", "distributed.world_size=%d" % world, "distributed.ranks_per_node=%d" % gpn,
                "distributed.fsdp=hybrid", "runtime.mode=asteria", "train.micro_batch=%d" % micro,
                "train.grad_accum=%d" % accum, "optim.precondition_embeddings=true"]
        # A step after the recipe's warm-up of 2000 steps (refreshes published at once until then).
        plan = plan_ops(a.train, os.path.join(REPO, "configs/olmo-1b-soap.yaml"), sets, 2045)
        syncs = [op for op in plan if op["kind"] == "coherence_sync"]
        version = sum(f["version_bytes"] for f in facts.values())
        for label, shipped in (("S = 1", 1.0), ("S = 5", 0.2), ("S = 5, tolerance", a.shipped_fraction)):
            # Hierarchical shipping in hybrid: a version crosses to each other node once; the
            # owners are balanced over the nodes, so each NIC sends about version / period a step.
            per_sync = version * (nodes - 1) / nodes / period * shipped / len(syncs) if syncs else 0.0

            def duration(op):
                k, f = op["kind"], facts.get(op["layer"])
                if k == "forward":
                    return f["flops"] / (peak * mfu)
                if k == "backward":
                    return 2 * f["flops"] / (peak * mfu)
                if k == "optim_step":
                    return f["optim_flops"] / gpn / (peak * mfu)     # a quarter of the blocks per GPU
                if k == "coherence_sync":
                    return per_sync / bw_inter + al_inter
                if k == "gather":
                    return (gpn - 1) * al_intra + f["numel"] * 2 * (gpn - 1) / gpn / bw_intra   # bf16
                if k == "reduce_scatter":
                    t = (gpn - 1) * al_intra + f["numel"] * 4 * (gpn - 1) / gpn / bw_intra
                    if op["micro"] == accum - 1:   # then the shards' all-reduce across the nodes
                        t += 2 * (nodes - 1) * al_inter + 2 * (nodes - 1) / nodes * f["numel"] * 4 / bw_inter
                    return t
                return 0.0
            end, waited = simulate(plan, duration)
            compute = sum(duration(op) for op in plan if op["lane"] == "compute")
            rows.append({"nodes": nodes, "gpus": world, "micro_batch": micro, "grad_accum": accum, "run": label,
                         "step_s": end, "compute_s": compute, "exposed_comm_s": waited,
                         "coherence_s": per_sync * len(syncs) / bw_inter,
                         "tokens_per_s": global_batch * m["seq_len"] / end})
    L = ["# OLMo-7B SOAP, hybrid, projected to 16, 64 and 256 nodes", "",
         "`/usr/bin/python3 bench/multinode_model.py project %s --shipped-fraction %.2f`: the step-time model checked in" % (a.out, a.shipped_fraction),
         "model_check.md, with GPU durations: 4 GH200 per node (989 TFLOP/s bf16 at 40 % MFU, NVLink 450 GB/s at 80 %),",
         "200 Gb/s per node at 90 %; global batch 2048 x 2048 tokens (strong scaling), micro-batch 4 (2 at 256 nodes);",
         "the plan is asteria-train's own for that world (`--print-plan`). The refreshes run on the shadow pipeline's lane",
         "and are not on the step's path. S = 5 with tolerance ships the fraction of versions measured on bench-small.", "",
         "| nodes | GPUs | micro-batches | run | step (s) | compute (s) | exposed comm (s) | coherence on the NIC (s) | tokens/s |",
         "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        L.append("| %d | %d | %d x %d | %s | %.2f | %.2f | %.2f | %.3f | %.0f |" % (
            r["nodes"], r["gpus"], r["grad_accum"], r["micro_batch"], r["run"], r["step_s"], r["compute_s"],
            r["exposed_comm_s"], r["coherence_s"], r["tokens_per_s"]))
    os.makedirs(a.out, exist_ok=True)
    open(os.path.join(a.out, "projection.md"), "w").write("\n".join(L) + "\n")
    json.dump(rows, open(os.path.join(a.out, "projection.json"), "w"), indent=1)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 4))
        for label in ("S = 1", "S = 5", "S = 5, tolerance"):
            pts = [(r["nodes"], r["tokens_per_s"]) for r in rows if r["run"] == label]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
        ideal = [(r["nodes"], global_batch * m["seq_len"] / r["compute_s"]) for r in rows if r["run"] == "S = 1"]
        ax.plot([p[0] for p in ideal], [p[1] for p in ideal], linestyle="--", color="grey", label="compute only")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("nodes (4 GH200 each)")
        ax.set_ylabel("tokens / s")
        ax.set_title("OLMo-7B SOAP, hybrid: projected throughput")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(a.out, "projection.png"), dpi=120)
    except ImportError:
        pass
    print("\n".join(L))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--train", default=os.path.join(REPO, "build", "bin", "asteria-train"))
    sub = p.add_subparsers(dest="what", required=True)
    c = sub.add_parser("check")
    c.add_argument("runs")
    c.add_argument("out")
    j = sub.add_parser("project")
    j.add_argument("out")
    j.add_argument("--nodes", type=int, nargs="+", default=[16, 64, 256])
    j.add_argument("--shipped-fraction", type=float, default=0.42)
    a = p.parse_args()
    check(a) if a.what == "check" else project(a)


if __name__ == "__main__":
    main()
