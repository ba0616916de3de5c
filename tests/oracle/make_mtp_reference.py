#!/usr/bin/env python3
# PyTorch reference of the MTP head (docs/MODEL.md §8, issue 28) on the model fixtures
# that carry random mtp.* weights (generality/dense_vl: dense MLP; generality/moe_fused: MoE layer).
#
# transformers has no MTP module, so the head is written out here in float64 from the checkpoint's
# mtp.* tensors; only the base model's final hidden states come from transformers (float64 copy of
# the fp32 model): `last_hidden_state` of the backbone, which is AFTER model.norm, as §8 requires
# (h_t = the final-normed hidden state). The script checks that lm_head(h) reproduces the committed
# first-step references, and records whether transformers' output_hidden_states[-1] is pre- or
# post-norm (diagnostic only).
#
# For each case (fixture, prompt from its refs.json, K): x_n = the reference greedy token after the
# prompt; MTP position t takes (h_t, x_{t+1}) for t = 0..n-1 (the prompt passes causally through the
# head), its last row gives draft 1; draft i > 1 sits at position n + i - 2 and takes (d, draft i-1),
# d being the previous row's mtp.norm output. Drafts are greedy. Written per case, into
# OUT/<fixture>/: mtp_ref.json (ids, next token, drafts, gaps, checks) and mtp_<prompt>_k<K>.f32
# (K rows of vocab float32 logits, the float64 result rounded). tests/unit/model/mtp_reference.cpp
# compares the CPU backend's draft_mtp against them (cosine >= 0.9999).
#
# Runs where torch + transformers 5.17 are (the GPU machine; CPU math, a few seconds):
#   python3 tests/oracle/make_mtp_reference.py --out $OUT/mtp
# then, here: copy $OUT/mtp/generality/*/mtp_* into tests/fixtures/model/generality/*/.
import argparse
import copy
import json
import math
import os
import sys

from make_model_fixtures import Runner, load_fp32

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures", "model")

# (fixture, prompt name in refs.json, K)
CASES = [
    ("generality/dense_vl", "long_text", 2),  # 337 positions: several KV pages; Qwen3 vocabulary (600 KB a row)
    ("generality/moe_fused", "long", 4),      # 333 positions, MoE MTP layer (fused experts)
    ("generality/moe_fused", "short", 5),     # 7 positions, K = 5
]


def offset_rms_norm(x, w, eps):
    import torch
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + w)


def rope(x, positions, rot, theta):
    """NeoX rotate-half over the first `rot` dims of the last axis; x [T, heads, hd]."""
    import torch
    inv = 1.0 / (theta ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot))
    ang = positions.to(torch.float64)[:, None] * inv[None, :]  # [T, rot/2]
    cos, sin = ang.cos()[:, None, :].to(x.dtype), ang.sin()[:, None, :].to(x.dtype)
    half = rot // 2
    a, b, rest = x[..., :half], x[..., half:rot], x[..., rot:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin, rest], dim=-1)


class MtpHead:
    """docs/MODEL.md §8 over one layer, written from the checkpoint's mtp.* tensors."""

    def __init__(self, tensors, cfg, embed, lm_head, dtype):
        import torch
        self.cfg, self.dtype = cfg, dtype
        self.t = {k: v.to(dtype) for k, v in tensors.items() if k.startswith("mtp.")}
        self.embed, self.lm_head = embed.to(dtype), lm_head.to(dtype)
        self.eps = cfg["rms_norm_eps"]
        rp = cfg["rope_parameters"]
        self.theta = rp["rope_theta"]
        self.rot = int(cfg["head_dim"] * rp.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0)))
        self.moe = "num_experts" in cfg and cfg.get("num_experts")
        if "mtp.fc.weight" not in self.t:
            raise SystemExit("the checkpoint has no mtp.fc.weight")
        self.torch = torch

    def w(self, name):
        return self.t["mtp." + name]

    def attention(self, a, positions):
        torch, cfg = self.torch, self.cfg
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

    def swiglu(self, x, gate, up, down):
        return (torch_silu(x @ gate.T) * (x @ up.T)) @ down.T

    def ffn(self, f):
        torch, cfg = self.torch, self.cfg
        p = "layers.0.mlp."
        if not self.moe:
            return self.swiglu(f, self.w(p + "gate_proj.weight"), self.w(p + "up_proj.weight"), self.w(p + "down_proj.weight"))
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
                routed[t] += val[t, j] * self.swiglu(f[t:t + 1], g, u, d)[0]
        shared = self.swiglu(f, self.w(p + "shared_expert.gate_proj.weight"), self.w(p + "shared_expert.up_proj.weight"),
                             self.w(p + "shared_expert.down_proj.weight"))
        score = torch.sigmoid(f @ self.w(p + "shared_expert_gate.weight").T)  # [T, 1]
        return routed + shared * score

    def forward(self, hidden, next_tokens):
        """Rows t = 0..T-1 at positions 0..T-1: (h_t, x_{t+1}) -> d = mtp.norm(u) [T,H]."""
        torch = self.torch
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
        torch = self.torch
        rows_h = [hidden[t] for t in range(hidden.shape[0])]
        rows_x = list(prompt_ids[1:]) + [next_token]
        drafts, logits_rows, gaps = [], [], []
        for _ in range(k):
            d = self.forward(torch.stack(rows_h), rows_x)
            last = d[-1] @ self.lm_head.T  # the main LM head
            top2 = torch.topk(last, 2)
            drafts.append(int(top2.indices[0]))
            gaps.append(float(top2.values[0] - top2.values[1]))
            logits_rows.append(last)
            rows_h.append(d[-1])      # d fed back as the next hidden state
            rows_x.append(drafts[-1])  # with the draft just made
        return drafts, torch.stack(logits_rows), gaps


def torch_silu(x):
    import torch
    return torch.nn.functional.silu(x)


def run_case(fixture, prompt_name, k, fixtures_root, out_root, log):
    import torch
    from safetensors.torch import load_file
    fdir = os.path.join(fixtures_root, fixture)
    hf_dir = os.path.join(fdir, "hf")
    refs = json.load(open(os.path.join(fdir, "refs.json")))
    prompt = next(p for p in refs["prompts"] if p["name"] == prompt_name)
    ids, next_token = prompt["ids"], prompt["greedy_tokens"][0]
    cfg_json = json.load(open(os.path.join(hf_dir, "config.json")))
    cfg = cfg_json.get("text_config", cfg_json)
    arch = cfg_json["architectures"][0]

    model, info = load_fp32(arch, hf_dir)
    unexpected = [k for k in info.get("unexpected_keys", []) if not k.startswith("mtp.")]
    if unexpected or info.get("missing_keys"):
        raise SystemExit(f"{fixture}: loading reported {info}")
    model64 = copy.deepcopy(model).double()
    with torch.no_grad():
        h64 = Runner(model64).hidden(ids)[0]            # [n, H], after model.norm
        h32 = Runner(model).hidden(ids)[0]
        lm64 = model64.lm_head.weight
        # lm_head(h) must give the committed first-step logits: h is the final-normed state.
        first = h64[-1] @ lm64.T
        top_err = max(abs(float(first[i]) - v) for i, v in prompt["first_top5"])
        if int(first.argmax()) != next_token or top_err > 1e-3 * prompt["first_max_abs_logit"]:
            raise SystemExit(f"{fixture}/{prompt_name}: lm_head(last_hidden_state) does not reproduce the "
                             f"references (argmax {int(first.argmax())} vs {next_token}, top5 error {top_err})")
        # Diagnostic: what transformers' output_hidden_states[-1] holds.
        try:
            backbone = model64.model if hasattr(model64.model, "layers") else model64.model.language_model
            hs = backbone(input_ids=torch.tensor([ids]), output_hidden_states=True, use_cache=False).hidden_states[-1][0]
            hs_last = "post-norm (equals last_hidden_state)" if float((hs - h64).abs().max()) < 1e-9 else \
                f"pre-norm (max |d| to last_hidden_state {float((hs - h64).abs().max()):.3g})"
        except Exception as e:  # diagnostic only
            hs_last = f"not available: {e!r}"

        tensors = load_file(os.path.join(hf_dir, "model.safetensors"))
        embed = model64.get_input_embeddings().weight
        head64 = MtpHead(tensors, cfg, embed, lm64, torch.float64)
        drafts, logits64, gaps = head64.draft(h64, ids, next_token, k)
        head32 = MtpHead(tensors, cfg, embed, model.lm_head.weight, torch.float32)
        drafts32, logits32, _ = head32.draft(h32, ids, next_token, k)
    f32_noise = float((logits32.double() - logits64).abs().max())
    out_dir = os.path.join(out_root, fixture)
    os.makedirs(out_dir, exist_ok=True)
    logits_file = f"mtp_{prompt_name}_k{k}.f32"
    with open(os.path.join(out_dir, logits_file), "wb") as f:
        f.write(logits64.float().contiguous().numpy().astype("<f4").tobytes())
    entry = {"prompt": prompt_name, "ids": ids, "next_token": next_token, "k": k, "drafts": drafts,
             "draft_gaps": gaps, "max_abs_logit": float(logits64.abs().max()), "logits_file": logits_file,
             "fp32_drafts_equal": drafts32 == drafts, "fp32_logits_max_abs_diff": f32_noise}
    log(f"  {fixture} {prompt_name} n={len(ids)} K={k}: drafts {drafts} gaps {[round(g, 4) for g in gaps]} "
        f"fp32 noise {f32_noise:.3g}; output_hidden_states[-1] is {hs_last}")
    return entry, hs_last


def main():
    ap = argparse.ArgumentParser(description="PyTorch reference of the MTP head (docs/MODEL.md §8)")
    ap.add_argument("--fixtures", default=FIXTURES, help="tests/fixtures/model of the checkout")
    ap.add_argument("--out", required=True, help="output root: <fixture>/mtp_ref.json and mtp_*.f32 go here")
    ap.add_argument("--threads", type=int, default=8)
    args = ap.parse_args()
    import torch
    import transformers
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    logf = open(os.path.join(args.out, "mtp_log.txt"), "w")

    def log(msg):
        print(msg, flush=True)
        logf.write(msg + "\n")

    by_fixture, failures = {}, []
    for fixture, prompt, k in CASES:
        try:
            entry, hs_last = run_case(fixture, prompt, k, args.fixtures, args.out, log)
            doc = by_fixture.setdefault(fixture, {
                "format": 1, "fixture": fixture, "generated_by": "tests/oracle/make_mtp_reference.py",
                "torch": torch.__version__, "transformers": transformers.__version__,
                "hidden_source": "float64 copy of the fp32 model: backbone last_hidden_state (after model.norm)",
                "output_hidden_states_last": hs_last,
                "compute": "MTP head in float64 from the bf16 mtp.* tensors (docs/MODEL.md §8); logits files are "
                           "the float64 results rounded to float32", "cases": []})
            doc["cases"].append(entry)
        except BaseException as e:  # keep going: report every case
            import traceback
            log(traceback.format_exc())
            failures.append((fixture, prompt, repr(e)))
    for fixture, doc in by_fixture.items():
        with open(os.path.join(args.out, fixture, "mtp_ref.json"), "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    if failures:
        log(f"FAILURES: {failures}")
        sys.exit(1)


if __name__ == "__main__":
    main()
