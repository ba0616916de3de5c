# The fixture list and the parts of the oracle that need only Python 3: prompts, the tiny tokenizer,
# generation configs and the size plan. Used by make_model_fixtures.py (see README.md beside it).
import random

FAMILY_LIMIT_BYTES = 15 * 1024 * 1024
QWEN3_VOCAB_ROWS = 151936
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
