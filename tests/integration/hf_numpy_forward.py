#!/usr/bin/python3
"""Forward pass of an exported model folder as transformers' OlmoForCausalLM (model_type "olmo")
or Olmo2ForCausalLM ("olmo2") computes it, written from those classes' documented semantics with
numpy only (float64), so the export can be checked without torch or transformers.

    hf_numpy_forward.py MODEL_DIR TOKENS_FILE OUT_FILE

TOKENS_FILE: one sequence per line, token ids separated by spaces; all lines the same length.
OUT_FILE:    the logits as raw little-endian float64, shape [sequences, length, vocab_size]
             (vocab_size of config.json, i.e. the padded embedding rows).

It also checks what HF's loader would: model.safetensors holds exactly the tensors the class
has (no missing, no unexpected names), with the config's shapes, and data offsets that tile
the data area. Any mismatch exits with status 1 and a message.

Semantics (both classes): embed_tokens; per layer q/k/v projections [no bias], heads split as
[T, H, hd]; RoPE with rotate_half (x * cos + cat(-x2, x1) * sin, inv_freq =
theta^(-arange(0, hd, 2)/hd), cos/sin of cat(freqs, freqs)); causal softmax(q k^T / sqrt(hd)) v;
o_proj; MLP down(silu(gate(x)) * up(x)); final norm; logits = h lm_head^T (lm_head = embed_tokens
when tie_word_embeddings).
  olmo : pre-norm, LayerNorm without weight or bias, eps fixed at 1e-5 (OlmoLayerNorm);
         h = x + attn(ln(x)); out = h + mlp(ln(h)); optional clip_qkv clamps q, k, v.
  olmo2: post-norm RMSNorm with weight, eps rms_norm_eps; q_norm / k_norm over the whole q / k
         projection outputs before the head split; h = x + post_attention_layernorm(attn(x));
         out = h + post_feedforward_layernorm(mlp(h)).
"""
import json
import os
import struct
import sys

import numpy as np


def fail(msg):
    print("hf_numpy_forward: " + msg, file=sys.stderr)
    sys.exit(1)


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    base = 8 + n
    meta = header.pop("__metadata__", None)
    if meta != {"format": "pt"}:
        fail(f"{path}: __metadata__ is {meta!r}, expected {{'format': 'pt'}}")
    spans = sorted((info["data_offsets"][0], info["data_offsets"][1], name) for name, info in header.items())
    end = 0
    for b, e, name in spans:
        if b != end:
            fail(f"{path}: tensor {name} starts at {b}, expected {end} (hole or overlap)")
        end = e
    if base + end != len(blob):
        fail(f"{path}: data area is {len(blob) - base} bytes, tensors cover {end}")
    tensors, dtypes = {}, set()
    for name, info in header.items():
        b, e = info["data_offsets"]
        raw = blob[base + b:base + e]
        if info["dtype"] == "F32":
            a = np.frombuffer(raw, dtype="<f4")
        elif info["dtype"] == "BF16":
            a = (np.frombuffer(raw, dtype="<u2").astype("<u4") << 16).view("<f4")
        else:
            fail(f"{path}: tensor {name} has dtype {info['dtype']}, expected F32 or BF16")
        shape = tuple(info["shape"])
        if a.size != int(np.prod(shape)):
            fail(f"{path}: tensor {name} has {a.size} values for shape {shape}")
        tensors[name] = a.reshape(shape).astype(np.float64)
        dtypes.add(info["dtype"])
    return tensors, dtypes


def expected_shapes(cfg):
    kind = cfg["model_type"]
    C, F, E = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    H, KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = C // H
    s = {"model.embed_tokens.weight": (E, C)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        s[p + "self_attn.q_proj.weight"] = (H * hd, C)
        s[p + "self_attn.k_proj.weight"] = (KV * hd, C)
        s[p + "self_attn.v_proj.weight"] = (KV * hd, C)
        s[p + "self_attn.o_proj.weight"] = (C, H * hd)
        s[p + "mlp.gate_proj.weight"] = (F, C)
        s[p + "mlp.up_proj.weight"] = (F, C)
        s[p + "mlp.down_proj.weight"] = (C, F)
        if kind == "olmo2":
            s[p + "self_attn.q_norm.weight"] = (H * hd,)
            s[p + "self_attn.k_norm.weight"] = (KV * hd,)
            s[p + "post_attention_layernorm.weight"] = (C,)
            s[p + "post_feedforward_layernorm.weight"] = (C,)
    if kind == "olmo2":
        s["model.norm.weight"] = (C,)
    if not cfg.get("tie_word_embeddings", False):
        s["lm_head.weight"] = (E, C)
    return s


def layer_norm(x, eps=1e-5):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps)


def rms_norm(x, w, eps):
    return w * (x / np.sqrt((x * x).mean(-1, keepdims=True) + eps))


def rope(x, theta):
    """x: [T, H, hd] -> rotated, HF's rotate_half convention."""
    T, _, hd = x.shape
    inv_freq = 1.0 / theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd)
    freqs = np.outer(np.arange(T, dtype=np.float64), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)[:, None, :]
    x1, x2 = x[..., :hd // 2], x[..., hd // 2:]
    return x * np.cos(emb) + np.concatenate([-x2, x1], axis=-1) * np.sin(emb)


def attention(q, k, v):
    """q, k, v: [T, H, hd] -> [T, H * hd], causal."""
    T, H, hd = q.shape
    s = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd)
    s = np.where(np.tril(np.ones((T, T), dtype=bool))[None], s, -np.inf)
    s = s - s.max(-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(-1, keepdims=True)
    return np.einsum("hts,shd->thd", p, v).reshape(T, H * hd)


def forward(cfg, w, ids):
    kind = cfg["model_type"]
    C, H = cfg["hidden_size"], cfg["num_attention_heads"]
    hd = C // H
    theta = float(cfg["rope_theta"])
    eps = float(cfg.get("rms_norm_eps", 1e-5))
    clip = cfg.get("clip_qkv")
    x = w["model.embed_tokens.weight"][np.asarray(ids)]
    T = x.shape[0]

    def attn(i, h):
        p = f"model.layers.{i}.self_attn."
        q, k, v = (h @ w[p + n + "_proj.weight"].T for n in ("q", "k", "v"))
        if kind == "olmo" and clip is not None:
            q, k, v = (np.clip(t, -clip, clip) for t in (q, k, v))
        if kind == "olmo2":
            q = rms_norm(q, w[p + "q_norm.weight"], eps)
            k = rms_norm(k, w[p + "k_norm.weight"], eps)
        q, k, v = (t.reshape(T, -1, hd) for t in (q, k, v))
        return attention(rope(q, theta), rope(k, theta), v) @ w[p + "o_proj.weight"].T

    def mlp(i, h):
        p = f"model.layers.{i}.mlp."
        g = h @ w[p + "gate_proj.weight"].T
        return ((g / (1.0 + np.exp(-g))) * (h @ w[p + "up_proj.weight"].T)) @ w[p + "down_proj.weight"].T

    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        if kind == "olmo":
            x = x + attn(i, layer_norm(x))
            x = x + mlp(i, layer_norm(x))
        else:
            x = x + rms_norm(attn(i, x), w[p + "post_attention_layernorm.weight"], eps)
            x = x + rms_norm(mlp(i, x), w[p + "post_feedforward_layernorm.weight"], eps)
    x = layer_norm(x) if kind == "olmo" else rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", False) else w["lm_head.weight"]
    return x @ head.T


def main():
    if len(sys.argv) != 4:
        fail("usage: hf_numpy_forward.py MODEL_DIR TOKENS_FILE OUT_FILE")
    model_dir, tokens_file, out_file = sys.argv[1:]
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    arch = {"olmo": "OlmoForCausalLM", "olmo2": "Olmo2ForCausalLM"}.get(cfg.get("model_type"))
    if arch is None or cfg.get("architectures") != [arch]:
        fail(f"config.json: model_type {cfg.get('model_type')!r} / architectures {cfg.get('architectures')!r}")
    if cfg.get("attention_bias", False) or cfg["num_key_value_heads"] != cfg["num_attention_heads"]:
        fail("config.json: attention_bias or grouped-query attention is not what an Asteria export writes")
    w, _ = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    want = expected_shapes(cfg)
    missing = sorted(set(want) - set(w))
    unexpected = sorted(set(w) - set(want))
    if missing or unexpected:
        fail(f"model.safetensors: missing {missing}, unexpected {unexpected}")
    for name, shape in want.items():
        if w[name].shape != shape:
            fail(f"model.safetensors: {name} has shape {w[name].shape}, the config gives {shape}")
    with open(tokens_file) as f:
        seqs = [[int(t) for t in line.split()] for line in f if line.strip()]
    if not seqs or len({len(s) for s in seqs}) != 1:
        fail(f"{tokens_file}: expected one or more sequences of equal length")
    logits = np.stack([forward(cfg, w, s) for s in seqs])
    logits.astype("<f8").tofile(out_file)
    print(f"{arch}: {len(seqs)} x {len(seqs[0])} tokens -> logits {logits.shape}")


if __name__ == "__main__":
    main()
