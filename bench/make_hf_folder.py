#!/usr/bin/python3
"""A synthetic Hugging Face OlmoForCausalLM / Olmo2ForCausalLM folder of a preset's exact shapes and
dtype (random weights, normal with std 0.02, norm weights 1), for measuring the import and
generation at that size where the real weights cannot be fetched.

    make_hf_folder.py OUT_DIR [--family olmo|olmo2] [--dtype bf16|f32] [--seed N]
        [--hidden 2048 --layers 16 --heads 16 --intermediate 8192 --vocab 50304 --positions 2048
         --rope-theta 10000 --tied|--untied]

Defaults: OLMo-1B (allenai/OLMo-1B-hf's shapes), bf16. Writes OUT_DIR/config.json and
OUT_DIR/model.safetensors, one tensor at a time (memory: the largest tensor)."""
import argparse
import json
import os
import struct

import numpy as np


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--family", default="olmo", choices=["olmo", "olmo2"])
    p.add_argument("--dtype", default="bf16", choices=["bf16", "f32"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--intermediate", type=int, default=8192)
    p.add_argument("--vocab", type=int, default=50304)
    p.add_argument("--positions", type=int, default=2048)
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--tied", dest="tied", action="store_true", default=True)
    p.add_argument("--untied", dest="tied", action="store_false")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    olmo2 = a.family == "olmo2"
    C, F, V = a.hidden, a.intermediate, a.vocab
    shapes = [("model.embed_tokens.weight", (V, C))]
    for i in range(a.layers):
        q = f"model.layers.{i}."
        shapes += [(q + f"self_attn.{n}_proj.weight", (C, C)) for n in "qkvo"]
        shapes += [(q + "mlp.gate_proj.weight", (F, C)), (q + "mlp.up_proj.weight", (F, C)),
                   (q + "mlp.down_proj.weight", (C, F))]
        if olmo2:
            shapes += [(q + n, (C,)) for n in ("self_attn.q_norm.weight", "self_attn.k_norm.weight",
                                               "post_attention_layernorm.weight", "post_feedforward_layernorm.weight")]
    if olmo2:
        shapes.append(("model.norm.weight", (C,)))
    if not a.tied:
        shapes.append(("lm_head.weight", (V, C)))
    elem = 2 if a.dtype == "bf16" else 4
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, shape in shapes:
        n = int(np.prod(shape)) * elem
        header[name] = {"dtype": "BF16" if a.dtype == "bf16" else "F32", "shape": list(shape),
                        "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    rng = np.random.default_rng(a.seed)
    with open(os.path.join(a.out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for name, shape in shapes:
            x = np.ones(shape, np.float32) if len(shape) == 1 else rng.standard_normal(shape, np.float32) * np.float32(0.02)
            if a.dtype == "bf16":
                bits = x.view(np.uint32)
                x = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")   # round to nearest even
            f.write(x.tobytes())
    config = {"architectures": ["Olmo2ForCausalLM" if olmo2 else "OlmoForCausalLM"], "model_type": a.family,
              "hidden_size": C, "intermediate_size": F, "num_hidden_layers": a.layers, "num_attention_heads": a.heads,
              "num_key_value_heads": a.heads, "hidden_act": "silu", "vocab_size": V,
              "max_position_embeddings": a.positions, "rope_theta": a.rope_theta, "rope_scaling": None,
              "attention_bias": False, "attention_dropout": 0.0, "tie_word_embeddings": a.tied,
              "pad_token_id": 1, "eos_token_id": 50279, "torch_dtype": "bfloat16" if a.dtype == "bf16" else "float32"}
    if olmo2:
        config["rms_norm_eps"] = 1e-6
    else:
        config["clip_qkv"] = None
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    print(f"{a.out}: {len(shapes)} tensors, {offset} bytes of {a.dtype}")


if __name__ == "__main__":
    main()
