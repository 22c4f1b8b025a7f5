#!/usr/bin/python3
"""Muon with its auxiliary AdamW as the authors' code computes it (KellerJordan/Muon, muon.py:
zeropower_via_newtonschulz5, muon_update, adam_update and SingleDeviceMuonWithAuxAdam.step),
transcribed step by step in PyTorch (Debian's python3-torch), run on a recorded gradient sequence
in float32 and in float64.

    muon_reference.py DIR

DIR/manifest.json: {"steps": S, "lr": .., "momentum": .., "nesterov": .., "ns_steps": ..,
                    "weight_decay": .., "adam": {"lr": .., "betas": [b1, b2], "eps": .., "weight_decay": ..},
                    "tensors": [{"name": .., "shape": [..], "muon": true|false}, ...]}
DIR/init.f32:   every tensor's initial values, in the manifest's order, float32
DIR/grads.f32:  S steps of every tensor's gradient, the same order, float32
Writes DIR/ref.f32.f64 and DIR/ref.f64.f64: every tensor after the S steps (float64 values),
computed in float32 and in float64.

The one change from muon.py: its Newton-Schulz iteration runs in bfloat16 (`X = G.bfloat16()`,
for GPUs); here it runs in the run's dtype, so that float64 is the exact computation and float32
the authors' arithmetic at Asteria's CPU precision.
"""
import json
import os
import sys

import torch


def zeropower_via_newtonschulz5(G, steps, dtype):
    a, b, c = (3.4445, -4.7750, 2.0315)
    X = G.to(dtype)
    if G.size(-2) > G.size(-1):
        X = X.mT
    X = X / (X.norm(dim=(-2, -1), keepdim=True) + 1e-7)
    for _ in range(steps):
        A = X @ X.mT
        B = b * A + c * A @ A
        X = a * X + B @ X
    if G.size(-2) > G.size(-1):
        X = X.mT
    return X


def muon_update(grad, momentum, beta, ns_steps, nesterov, dtype):
    momentum.lerp_(grad, 1 - beta)
    update = grad.lerp_(momentum, beta) if nesterov else momentum
    update = zeropower_via_newtonschulz5(update, ns_steps, dtype)
    update *= max(1, grad.size(-2) / grad.size(-1)) ** 0.5
    return update


def adam_update(grad, buf1, buf2, step, betas, eps):
    buf1.lerp_(grad, 1 - betas[0])
    buf2.lerp_(grad.square(), 1 - betas[1])
    buf1c = buf1 / (1 - betas[0] ** step)
    buf2c = buf2 / (1 - betas[1] ** step)
    return buf1c / (buf2c.sqrt() + eps)


def run(m, init, grads, dtype):
    params, states = [], []
    at = 0
    for t in m["tensors"]:
        n = 1
        for d in t["shape"]:
            n *= d
        params.append(init[at:at + n].reshape(t["shape"]).to(dtype).clone())
        states.append({})
        at += n
    total = at
    adam = m["adam"]
    for s in range(m["steps"]):
        at = 0
        for t, p, state in zip(m["tensors"], params, states):
            g = grads[s * total + at:s * total + at + p.numel()].reshape(p.shape).to(dtype).clone()
            at += p.numel()
            if t["muon"]:   # SingleDeviceMuonWithAuxAdam.step, the Muon group
                if not state:
                    state["momentum_buffer"] = torch.zeros_like(p)
                update = muon_update(g, state["momentum_buffer"], m["momentum"], m["ns_steps"], m["nesterov"], dtype)
                p.mul_(1 - m["lr"] * m["weight_decay"])
                p.add_(update.reshape(p.shape), alpha=-m["lr"])
            else:           # the auxiliary Adam group
                if not state:
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                    state["step"] = 0
                state["step"] += 1
                update = adam_update(g, state["exp_avg"], state["exp_avg_sq"], state["step"], adam["betas"], adam["eps"])
                p.mul_(1 - adam["lr"] * adam["weight_decay"])
                p.add_(update, alpha=-adam["lr"])
    return torch.cat([p.reshape(-1).to(torch.float64) for p in params])


def main():
    if len(sys.argv) != 2:
        print("usage: muon_reference.py DIR", file=sys.stderr)
        sys.exit(2)
    d = sys.argv[1]
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    with open(os.path.join(d, "manifest.json")) as f:
        m = json.load(f)
    init = torch.frombuffer(bytearray(open(os.path.join(d, "init.f32"), "rb").read()), dtype=torch.float32)
    grads = torch.frombuffer(bytearray(open(os.path.join(d, "grads.f32"), "rb").read()), dtype=torch.float32)
    with torch.no_grad():
        for dtype, tag in ((torch.float32, "f32"), (torch.float64, "f64")):
            run(m, init, grads, dtype).numpy().astype("<f8").tofile(os.path.join(d, f"ref.{tag}.f64"))
    print(f"muon_reference: {len(m['tensors'])} tensors, {m['steps']} steps, float32 and float64")


if __name__ == "__main__":
    main()
