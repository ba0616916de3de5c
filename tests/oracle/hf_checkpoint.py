# Random weights and checkpoint surgery for the model oracle: the init that replaces transformers'
# random mtp.* tensors, per-expert <-> fused expert layouts, configs and config.json checks.
# torch and transformers are imported inside the functions (they exist only on the GPU machine).
import json
import math
import os
import re

from fixture_plan import is_moe



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
