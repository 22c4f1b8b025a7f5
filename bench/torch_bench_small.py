#!/usr/bin/python3
"""PyTorch (CPU, fp32) reference of asteria's bench-small training step, for throughput only.

Same model as asteria's preset `bench-small` (src/model/presets.cpp): d_model 256, 4 layers,
4 heads of 64, seq 256, micro-batch 8, vocab = embedding 4096, pre-norm RMSNorm with weights
(eps 1e-5), fused QKV [3C, C], RoPE theta 10000 (rotate-half), causal softmax attention,
att_out [C, C], SwiGLU with fused up [2F, C] (x | gate) and down [C, F], F = 1024, final RMSNorm,
untied LM head [V, C], no biases, loss = mean cross-entropy. One step = zero grads (set to
None), forward, backward, global-norm clip 1.0, AdamW (lr 2e-3, betas 0.9/0.95, eps 1e-8,
weight decay 0.1 on block matrices only, as configs/bench-small-adamw.yaml: decay_embeddings
false). Token batches are random (throughput only). No LR schedule (it costs nothing).

--precision bf16 runs the forward under torch.autocast("cpu", dtype=torch.bfloat16): PyTorch's
own mixed precision, whose linear layers and bmm go to its oneDNN (MKL-DNN 2.6) bf16 matmul on a
CPU with AVX512-BF16 (fp32 master weights, AdamW and clipping in fp32); fp32 (the default) runs
its GEMMs on the BLAS torch loads (OpenBLAS here: 1.13's fp32 addmm has no oneDNN path).

Run with /usr/bin/python3 (Debian's torch 1.13). Usage:

  torch_bench_small.py [--threads N] [--steps N] [--warmup N] [--precision fp32|bf16]
                       [--variant NAME ...]        in-process variants, run step-interleaved
  variants: <attn>-<optim>-<clip> with attn in {maskfill, baddbmm, sdpa}, optim in
  {foreach, forloop}, clip in {foreach, torch}; default: the best one found on this machine.

Prints one JSON line per variant: {"bench": "torch", "variant": ..., "tokens_per_s": median
over the steps after warm-up, "step_time_s", "fwd_s", "bwd_s", "optim_s" (medians), ...}.
Environment (tcmalloc via LD_PRELOAD, which OpenBLAS build via LD_LIBRARY_PATH) is the
driver's business (bench/throughput.sh); the JSON says what was actually loaded.
"""
import argparse
import ctypes
import json
import math
import os
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

B, T, C, L, H, FF, V = 8, 256, 256, 4, 4, 1024, 4096
D = C // H
EPS = 1e-5
THETA = 10000.0
DEFAULT_VARIANT = "baddbmm-forloop-torch"  # sweep winner; foreach AdamW/clip tie within noise


def expected_param_count():
    per_layer = C + 3 * C * C + C * C + C + 2 * FF * C + C * FF
    return V * C + L * per_layer + C + V * C


def rmsnorm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Block(nn.Module):
    def __init__(self, attn):
        super().__init__()
        self.attn = attn
        self.att_norm = nn.Parameter(torch.ones(C))
        self.qkv = nn.Linear(C, 3 * C, bias=False)
        self.att_out = nn.Linear(C, C, bias=False)
        self.mlp_norm = nn.Parameter(torch.ones(C))
        self.mlp_up = nn.Linear(C, 2 * FF, bias=False)
        self.mlp_down = nn.Linear(FF, C, bias=False)

    def forward(self, x, cos, sin, mask):
        h = rmsnorm(x, self.att_norm)
        qkv = self.qkv(h).view(B, T, 3, H, D)
        # RoPE on q and k together: [B, T, 2, H, D] -> [2, B, H, T, D]
        qk = qkv[:, :, :2].permute(2, 0, 3, 1, 4)
        qk = qk * cos + rotate_half(qk) * sin
        q, k = qk[0], qk[1]
        v = qkv[:, :, 2].transpose(1, 2)  # [B, H, T, D]
        if self.attn == "sdpa":
            y, _ = F._scaled_dot_product_attention(q, k, v, is_causal=True)
        elif self.attn == "baddbmm":
            q3 = q.reshape(B * H, T, D)
            k3 = k.reshape(B * H, T, D)
            s = torch.baddbmm(mask, q3, k3.transpose(1, 2), alpha=1.0 / math.sqrt(D))
            p = torch.softmax(s, dim=-1)
            y = torch.bmm(p, v.reshape(B * H, T, D)).view(B, H, T, D)
        else:  # maskfill
            s = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
            s = s.masked_fill(mask, float("-inf"))
            y = torch.matmul(torch.softmax(s, dim=-1), v)
        y = y.transpose(1, 2).reshape(B, T, C)
        x = x + self.att_out(y)
        u = self.mlp_up(rmsnorm(x, self.mlp_norm))
        a, g = u.chunk(2, dim=-1)  # (x | gate), as asteria's activation layout
        return x + self.mlp_down(a * F.silu(g))


class Model(nn.Module):
    def __init__(self, attn):
        super().__init__()
        self.attn = attn
        self.wte = nn.Embedding(V, C)
        self.blocks = nn.ModuleList([Block(attn) for _ in range(L)])
        self.norm_f = nn.Parameter(torch.ones(C))
        self.lm_head = nn.Linear(C, V, bias=False)
        for n, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.trunc_normal_(p, std=0.02, a=-0.06, b=0.06)
        inv = 1.0 / THETA ** (torch.arange(0, D, 2, dtype=torch.float32) / D)
        ang = torch.outer(torch.arange(T, dtype=torch.float32), inv)
        ang = torch.cat((ang, ang), dim=-1)  # rotate-half layout [T, D]
        self.register_buffer("cos", ang.cos(), persistent=False)
        self.register_buffer("sin", ang.sin(), persistent=False)
        causal = torch.ones(T, T, dtype=torch.bool).triu(1)
        if attn == "baddbmm":  # additive mask, broadcast over B*H by expand (no copy)
            m = torch.zeros(T, T).masked_fill(causal, float("-inf"))
            self.register_buffer("mask", m.expand(B * H, T, T), persistent=False)
        else:
            self.register_buffer("mask", causal, persistent=False)

    def forward(self, idx, targets):
        x = self.wte(idx)
        for blk in self.blocks:
            x = blk(x, self.cos, self.sin, self.mask)
        logits = self.lm_head(rmsnorm(x, self.norm_f))
        return F.cross_entropy(logits.view(-1, V), targets.reshape(-1))


def clip_foreach(grads, max_norm):
    norms = torch._foreach_norm(grads)
    total = torch.linalg.vector_norm(torch.stack(norms))
    coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    torch._foreach_mul_(grads, coef)
    return total


class Runner:
    def __init__(self, variant, bf16):
        self.variant = variant
        self.bf16 = bf16
        attn, optim, clip = variant.split("-")
        assert attn in ("maskfill", "baddbmm", "sdpa") and optim in ("foreach", "forloop")
        assert clip in ("foreach", "torch")
        self.clip = clip
        torch.manual_seed(0)
        self.model = Model(attn)
        decay = [p for n, p in self.model.named_parameters() if n.startswith("blocks.") and p.dim() == 2]
        other = [p for n, p in self.model.named_parameters() if not (n.startswith("blocks.") and p.dim() == 2)]
        self.params = decay + other
        self.opt = torch.optim.AdamW(
            [{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
            lr=2e-3, betas=(0.9, 0.95), eps=1e-8, foreach=(optim == "foreach"))
        self.gen = torch.Generator().manual_seed(1)
        self.times = []  # (step, fwd, bwd, optim)

    def step(self):
        idx = torch.randint(0, V, (B, T + 1), generator=self.gen)
        inputs, targets = idx[:, :-1].contiguous(), idx[:, 1:].contiguous()
        t0 = time.perf_counter()
        self.opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
            loss = self.model(inputs, targets)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        if self.clip == "foreach":
            clip_foreach([p.grad for p in self.params], 1.0)
        else:
            torch.nn.utils.clip_grad_norm_(self.params, 1.0)
        self.opt.step()
        t3 = time.perf_counter()
        self.times.append((t3 - t0, t1 - t0, t2 - t1, t3 - t2))
        return loss.item()


def loaded_libraries():
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            if any(s in path for s in ("openblas", "tcmalloc", "libblas", "libgomp", "libdnnl")):
                libs.add(os.path.realpath(path))
    return sorted(libs)


def openblas_corename():
    """The kernel set the OpenBLAS loaded into this process runs (None if none is loaded)."""
    for lib in loaded_libraries():
        if "openblas" in lib:
            try:
                get = ctypes.CDLL(lib).openblas_get_corename
            except (OSError, AttributeError):
                continue
            get.restype = ctypes.c_char_p
            return get().decode()
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=12, help="measured steps per variant")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--variant", nargs="*", default=[DEFAULT_VARIANT])
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    ap.add_argument("--tag", default="", help="free text copied into the JSON (the driver's setup)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    runners = [Runner(v, a.precision == "bf16") for v in a.variant]
    n_params = sum(p.numel() for p in runners[0].model.parameters())
    if n_params != expected_param_count():
        raise SystemExit(f"parameter count {n_params} != asteria bench-small {expected_param_count()}")
    losses = {}
    for i in range(a.warmup + a.steps):
        for r in runners:  # interleaved: step i of every variant, then step i + 1
            losses[r.variant] = r.step()
    blas = loaded_libraries()
    for r in runners:
        t = r.times[a.warmup:]
        med = [statistics.median(x[j] for x in t) for j in range(4)]
        print(json.dumps({
            "bench": "torch", "variant": r.variant, "precision": a.precision, "tag": a.tag,
            "tokens_per_s": B * T / med[0],
            "tokens_per_s_best": B * T / min(x[0] for x in t),
            "step_time_s": med[0], "fwd_s": med[1], "bwd_s": med[2], "optim_s": med[3],
            "step_times_s": [x[0] for x in t], "steps_measured": len(t), "warmup_steps": a.warmup, "last_loss": losses[r.variant],
            "params": n_params, "tokens_per_step": B * T,
            "torch": torch.__version__, "threads": torch.get_num_threads(),
            "interop_threads": torch.get_num_interop_threads(),
            "libraries": blas, "openblas_corename": openblas_corename(),
            "LD_PRELOAD": os.environ.get("LD_PRELOAD", ""),
            "LD_LIBRARY_PATH": os.environ.get("LD_LIBRARY_PATH", ""),
            "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "(unset)"),
            "OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE", "(unset)"),
            "ATEN_CPU_CAPABILITY": os.environ.get("ATEN_CPU_CAPABILITY", "(unset)"),
        }), flush=True)


if __name__ == "__main__":
    main()
