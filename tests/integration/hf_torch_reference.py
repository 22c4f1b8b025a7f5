#!/usr/bin/python3
"""Logits and loss of a Hugging Face model folder as transformers' OlmoForCausalLM (model_type
"olmo") or Olmo2ForCausalLM ("olmo2") computes them, written in PyTorch (Debian's python3-torch)
after those classes' forward passes (modeling_olmo.py, modeling_olmo2.py, transformers' shared
ForCausalLMLoss) step by step, because transformers itself does not install here.

    hf_torch_reference.py MODEL_DIR TOKENS_FILE OUT_PREFIX

TOKENS_FILE: one sequence per line, token ids separated by spaces, all lines the same length
             T + 1 (the labels are the ids themselves, shifted inside the loss as transformers
             does, so positions 0 .. T-1 are scored against ids 1 .. T).
Writes OUT_PREFIX.f32 and OUT_PREFIX.f64: the logits of positions 0 .. T-1 as raw little-endian
float64, shape [sequences, T, vocab_size] (every row of the LM head, config.json's vocab_size),
computed in float32 (transformers' default dtype) and in float64; and OUT_PREFIX.json:
{"loss_f32": ..., "loss_f64": ...}.

float32 follows transformers' dtypes exactly (norms in float32, RoPE tables in float32, the
attention softmax in float32, the loss on logits.float()). float64 runs the same lines with
every tensor float64: the norms' and RoPE's float32 casts keep float64 there, so that only
rounding separates it from an exact computation.

It also checks what transformers' loader would: the safetensors files hold exactly the tensors
the class has, with config.json's shapes. Any mismatch exits with status 1 and a message.
"""
import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F


def fail(msg):
    print("hf_torch_reference: " + msg, file=sys.stderr)
    sys.exit(1)


DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    header.pop("__metadata__", None)
    base = 8 + n
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        if info["dtype"] not in DTYPES:
            fail(f"{path}: tensor {name} has dtype {info['dtype']}")
        t = torch.frombuffer(bytearray(blob[base + b:base + e]), dtype=DTYPES[info["dtype"]])
        out[name] = t.reshape(info["shape"])
    return out


def read_weights(model_dir):
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    w = {}
    for name in files:
        w.update(read_safetensors(os.path.join(model_dir, name)))
    return w


def expected_shapes(cfg):
    kind = cfg["model_type"]
    C, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    H = cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads") or H
    hd = C // H
    s = {"model.embed_tokens.weight": (V, C)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        s[p + "self_attn.q_proj.weight"] = (H * hd, C)
        s[p + "self_attn.k_proj.weight"] = (KV * hd, C)
        s[p + "self_attn.v_proj.weight"] = (KV * hd, C)
        s[p + "self_attn.o_proj.weight"] = (C, H * hd)
        s[p + "mlp.gate_proj.weight"] = (I, C)
        s[p + "mlp.up_proj.weight"] = (I, C)
        s[p + "mlp.down_proj.weight"] = (C, I)
        if kind == "olmo2":
            s[p + "self_attn.q_norm.weight"] = (H * hd,)
            s[p + "self_attn.k_norm.weight"] = (KV * hd,)
            s[p + "post_attention_layernorm.weight"] = (C,)
            s[p + "post_feedforward_layernorm.weight"] = (C,)
    if kind == "olmo2":
        s["model.norm.weight"] = (C,)
    if not cfg.get("tie_word_embeddings", False):
        s["lm_head.weight"] = (V, C)
    return s


class Reference:
    """One forward pass of the transformers class at dtype `dt` (float32 or float64)."""

    def __init__(self, cfg, weights, dt):
        self.cfg, self.dt = cfg, dt
        self.kind = cfg["model_type"]
        self.w = {k: v.to(dt) for k, v in weights.items()}
        self.C, self.H = cfg["hidden_size"], cfg["num_attention_heads"]
        self.hd = self.C // self.H
        self.eps = cfg.get("rms_norm_eps", 1e-5)
        self.clip = cfg.get("clip_qkv")
        self.norm_dtype = torch.float32 if dt == torch.float32 else dt

    # OlmoLayerNorm: F.layer_norm without weight or bias, eps fixed at 1e-5, in float32.
    def olmo_layer_norm(self, h):
        orig = h.dtype
        return F.layer_norm(h.to(self.norm_dtype), (self.C,), None, None, eps=1e-5).to(orig)

    # Olmo2RMSNorm: variance in float32, weight times the normalized value, cast back.
    def olmo2_rms_norm(self, h, weight):
        orig = h.dtype
        h = h.to(self.norm_dtype)
        variance = h.pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(variance + self.eps)
        return (weight * h).to(orig)

    # The default rotary embedding: inv_freq and the angles in float32, cos / sin cast to x's dtype.
    def rotary(self, T):
        base = self.cfg.get("rope_theta", 10000.0)
        fdt = self.norm_dtype
        inv_freq = 1.0 / (base ** (torch.arange(0, self.hd, 2, dtype=torch.int64).to(fdt) / self.hd))
        position_ids = torch.arange(T)[None, :]
        inv_freq_expanded = inv_freq[None, :, None].expand(position_ids.shape[0], -1, 1)
        freqs = (inv_freq_expanded @ position_ids[:, None, :].to(fdt)).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(self.dt), emb.sin().to(self.dt)

    @staticmethod
    def rotate_half(x):
        x1 = x[..., : x.shape[-1] // 2]
        x2 = x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def apply_rotary_pos_emb(self, q, k, cos, sin):
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        return (q * cos) + (self.rotate_half(q) * sin), (k * cos) + (self.rotate_half(k) * sin)

    def linear(self, x, name):
        return F.linear(x, self.w[name])

    def attention(self, i, h, cos, sin, mask):
        p = f"model.layers.{i}.self_attn."
        B, T, _ = h.shape
        q, k, v = (self.linear(h, p + n + "_proj.weight") for n in ("q", "k", "v"))
        if self.kind == "olmo" and self.clip is not None:
            q, k, v = (t.clamp(min=-self.clip, max=self.clip) for t in (q, k, v))
        if self.kind == "olmo2":
            q = self.olmo2_rms_norm(q, self.w[p + "q_norm.weight"])
            k = self.olmo2_rms_norm(k, self.w[p + "k_norm.weight"])
        q, k, v = (t.view(B, T, -1, self.hd).transpose(1, 2) for t in (q, k, v))
        q, k = self.apply_rotary_pos_emb(q, k, cos, sin)
        # eager_attention_forward: scores + the causal mask, softmax in float32, then @ v.
        weights = torch.matmul(q, k.transpose(2, 3)) * self.hd ** -0.5 + mask
        weights = F.softmax(weights, dim=-1, dtype=self.norm_dtype).to(q.dtype)
        out = torch.matmul(weights, v).transpose(1, 2).contiguous().reshape(B, T, -1)
        return self.linear(out, p + "o_proj.weight")

    def mlp(self, i, h):
        p = f"model.layers.{i}.mlp."
        return self.linear(F.silu(self.linear(h, p + "gate_proj.weight")) * self.linear(h, p + "up_proj.weight"),
                           p + "down_proj.weight")

    def forward(self, ids):
        B, T = ids.shape
        h = F.embedding(ids, self.w["model.embed_tokens.weight"])
        cos, sin = self.rotary(T)
        mask = torch.full((T, T), torch.finfo(self.dt).min, dtype=self.dt).triu(1)[None, None]
        for i in range(self.cfg["num_hidden_layers"]):
            p = f"model.layers.{i}."
            if self.kind == "olmo":   # LlamaDecoderLayer with OlmoLayerNorm
                h = h + self.attention(i, self.olmo_layer_norm(h), cos, sin, mask)
                h = h + self.mlp(i, self.olmo_layer_norm(h))
            else:                     # Olmo2DecoderLayer: norm after each sublayer
                h = h + self.olmo2_rms_norm(self.attention(i, h, cos, sin, mask), self.w[p + "post_attention_layernorm.weight"])
                h = h + self.olmo2_rms_norm(self.mlp(i, h), self.w[p + "post_feedforward_layernorm.weight"])
        h = self.olmo_layer_norm(h) if self.kind == "olmo" else self.olmo2_rms_norm(h, self.w["model.norm.weight"])
        head = "model.embed_tokens.weight" if self.cfg.get("tie_word_embeddings", False) else "lm_head.weight"
        return self.linear(h, head)

    # ForCausalLMLoss: logits upcast, labels padded with -100 and shifted by one, mean cross-entropy.
    def loss(self, logits, labels):
        logits = logits.to(self.norm_dtype)
        labels = F.pad(labels, (0, 1), value=-100)
        shift_labels = labels[..., 1:].contiguous()
        V = self.cfg["vocab_size"]
        return F.cross_entropy(logits.view(-1, V), shift_labels.view(-1), ignore_index=-100, reduction="mean")


def main():
    if len(sys.argv) != 4:
        fail("usage: hf_torch_reference.py MODEL_DIR TOKENS_FILE OUT_PREFIX")
    model_dir, tokens_file, out = sys.argv[1:]
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    arch = {"olmo": "OlmoForCausalLM", "olmo2": "Olmo2ForCausalLM"}.get(cfg.get("model_type"))
    if arch is None or cfg.get("architectures") != [arch]:
        fail(f"config.json: model_type {cfg.get('model_type')!r} / architectures {cfg.get('architectures')!r}")
    if cfg.get("attention_bias", False) or cfg.get("rope_scaling") is not None:
        fail("config.json: attention_bias or rope_scaling is not what an Asteria export writes")
    w = read_weights(model_dir)
    want = expected_shapes(cfg)
    missing, unexpected = sorted(set(want) - set(w)), sorted(set(w) - set(want))
    if missing or unexpected:
        fail(f"safetensors: missing {missing}, unexpected {unexpected}")
    for name, shape in want.items():
        if tuple(w[name].shape) != shape:
            fail(f"safetensors: {name} has shape {tuple(w[name].shape)}, config.json gives {shape}")
    with open(tokens_file) as f:
        seqs = [[int(t) for t in line.split()] for line in f if line.strip()]
    if not seqs or len({len(s) for s in seqs}) != 1 or len(seqs[0]) < 2:
        fail(f"{tokens_file}: expected sequences of equal length (at least 2)")
    ids = torch.tensor(seqs, dtype=torch.int64)
    losses = {}
    with torch.no_grad():
        for dt, tag in ((torch.float32, "f32"), (torch.float64, "f64")):
            ref = Reference(cfg, w, dt)
            logits = ref.forward(ids)
            losses["loss_" + tag] = float(ref.loss(logits, ids))
            logits[:, :-1, :].to(torch.float64).numpy().astype("<f8").tofile(f"{out}.{tag}")
    with open(out + ".json", "w") as f:
        json.dump(losses, f)
    T = len(seqs[0]) - 1
    print(f"{arch}: {len(seqs)} x {T} positions -> logits [{len(seqs)}, {T}, {cfg['vocab_size']}], "
          f"loss f32 {losses['loss_f32']:.9g}, f64 {losses['loss_f64']:.12g}")


if __name__ == "__main__":
    main()
