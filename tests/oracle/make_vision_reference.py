#!/usr/bin/env python3
# transformers references for the vision tower and multimodal prompts (issue 31), on the
# generality/dense_vl fixture: a Qwen3_5ForConditionalGeneration whose checkpoint already holds a
# tiny random tower (vision_config depth 1, hidden 32, 2 heads, patch 16, temporal 2, merge 2, a 4x4
# position grid, out 16; tests/oracle/README.md).
#
# Cases (pixels are generated here, deterministic, 8-bit RGB):
#   image_exact   a 32x64 image: a multiple of 32 px, no resize; grid 1x2x4 (the 4x4 table resampled)
#   image_resized a 40x100 image: smart_resize gives 32x96 (bicubic); grid 1x2x6
#   two_images    both images in one message (M-RoPE: the second image starts after the first)
#   video         4 frames of 32x64, no resize, frames not sampled (do_sample_frames=False): grid 2x2x4,
#                 one vision span per frame pair with timestamp text between (get_rope_index splits it)
# Prompts are built from ids (no tokenizer needed): random text ids below 151643, the config's
# vision_start / image / video / vision_end ids.
#
# Per case it writes, into OUT/generality/dense_vl/vision/ (tests/unit/vision/transformers_vision.cpp
# reads them from tests/fixtures/model/generality/dense_vl/vision/):
#   vision_ref.json  per media item: kind, source size, grid_thw, the processor used, the pixel file, the
#                    tower's output file and its fp32-vs-fp64 noise; per case: input ids, mm_token_type_ids,
#                    the M-RoPE position ids (get_rope_index: 3 rows), rope_delta, the first step's top 64
#                    (id, logit), max |logit|, 8 greedy tokens (full recompute each step) and their top-2 gaps.
#   <item>.pixels.f32    the processor's pixel_values (rows of 3*2*16*16, its patch order), float32
#   <item>.tower.f32     model.visual(...).pooler_output: merged rows of out_hidden_size, float32
#   <item>.rgb.u8        the source pixels (frames x height x width x 3), for comparing a decoder's resize
# About 300 KB in all.
#
# Runs where torch + transformers 5.17 are (the GPU machine; CPU math, seconds):
#   python3 tests/oracle/make_vision_reference.py --out $OUT/vision
# `--plan` needs only Python 3: it prints the cases, grids and file sizes.
import argparse
import copy
import json
import math
import os
import random
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures", "model")
FIXTURE = "generality/dense_vl"
GREEDY_STEPS = 8
TOP_LOGITS = 64
PATCH, TEMPORAL, MERGE = 16, 2, 2
# The processors' bounds for this tiny fixture (pixels; video: frames x pixels), small so files stay small.
IMAGE_PIXELS = (32 * 32, 128 * 128)
VIDEO_PIXELS = (4 * 32 * 32, 4 * 128 * 128)

MEDIA = {  # name: (kind, frames, height, width, seed)
    "a": ("image", 1, 32, 64, 1),
    "b": ("image", 1, 40, 100, 2),
    "v": ("video", 4, 32, 64, 3),
}
CASES = [  # name, prompt layout: ints = that many random text ids, names = media items
    ("image_exact", [4, "a", 3]),
    ("image_resized", [3, "b", 4]),
    ("two_images", [2, "a", 3, "b", 2]),
    ("video", [3, "v", 2]),
]


def smart_resize(height, width, factor, min_pixels, max_pixels, frames=1):
    """transformers' smart_resize (qwen2_vl image / qwen3_vl video, frames >= 2 for video)."""
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    t_bar = round(frames / TEMPORAL) * TEMPORAL if frames > 1 else 1
    if t_bar * h_bar * w_bar > max_pixels:
        beta = math.sqrt((frames * height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif t_bar * h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (frames * height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def grid_of(name):
    kind, frames, h, w, _ = MEDIA[name]
    lo, hi = IMAGE_PIXELS if kind == "image" else VIDEO_PIXELS
    rh, rw = smart_resize(h, w, PATCH * MERGE, lo, hi, frames if kind == "video" else 1)
    t = max(1, (frames + TEMPORAL - 1) // TEMPORAL)
    return t, rh // PATCH, rw // PATCH, (rh, rw)


def pixels_of(name):
    """Deterministic 8-bit RGB frames [frames][h][w][3]: gradients, stripes and noise."""
    kind, frames, h, w, seed = MEDIA[name]
    rng = random.Random(seed)
    out = []
    for f in range(frames):
        frame = []
        for y in range(h):
            row = []
            for x in range(w):
                r = (x * 255 // max(1, w - 1) + 40 * f) % 256
                g = (y * 255 // max(1, h - 1) + (37 if (x // 5) % 2 else 0)) % 256
                b = (rng.randrange(256) + 3 * (x + y)) % 256
                row.append((r, g, b))
            frame.append(row)
        out.append(frame)
    return out


def manual_patchify(frames_rgb, rh, rw):
    """Rows of the processor's patch order from already-sized frames (no resize): rescale 1/255,
    normalise with mean = std = 0.5, pad the frame count to a multiple of 2 with the last frame,
    view (t, T, C, h/M, M, P, w/M, M, P), permute (0, 3, 6, 4, 7, 2, 1, 5, 8)."""
    frames = list(frames_rgb)
    while len(frames) % TEMPORAL:
        frames.append(frames[-1])
    gt, gh, gw = len(frames) // TEMPORAL, rh // PATCH, rw // PATCH
    rows = []
    for t in range(gt):
        for by in range(gh // MERGE):
            for bx in range(gw // MERGE):
                for my in range(MERGE):
                    for mx in range(MERGE):
                        py, px = by * MERGE + my, bx * MERGE + mx
                        row = []
                        for c in range(3):
                            for tt in range(TEMPORAL):
                                fr = frames[t * TEMPORAL + tt]
                                for y in range(PATCH):
                                    for x in range(PATCH):
                                        v = fr[py * PATCH + y][px * PATCH + x][c] / 255.0
                                        row.append((v - 0.5) / 0.5)
                        rows.append(row)
    return rows


def plan():
    total = 0
    for name, (kind, frames, h, w, _) in MEDIA.items():
        t, gh, gw, (rh, rw) = grid_of(name)
        n = t * gh * gw
        b = n * 3 * TEMPORAL * PATCH * PATCH * 4 + (n // 4) * 16 * 4 + frames * h * w * 3
        total += b
        print(f"  {name}: {kind} {frames}x{h}x{w} -> {rh}x{rw}, grid {t}x{gh}x{gw}, {n // 4} merged tokens, {b} bytes")
    for name, layout in CASES:
        print(f"  case {name}: {layout}")
    print(f"  about {total + 40000} bytes with vision_ref.json")


def write_f32(path, values):
    with open(path, "wb") as f:
        f.write(struct.pack(f"<{len(values)}f", *values))


def process(name, log):
    """pixel_values rows and the grid via transformers' processors when they load, else the formula."""
    import numpy as np
    import torch
    kind, frames, h, w, _ = MEDIA[name]
    rgb = np.array(pixels_of(name), dtype=np.uint8)  # [F, H, W, 3]
    common = dict(patch_size=PATCH, temporal_patch_size=TEMPORAL, merge_size=MERGE,
                  image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
    errors = []
    if kind == "image":
        import transformers as tf
        for cls_name in ("Qwen2VLImageProcessor", "Qwen2VLImageProcessorPil", "Qwen2VLImageProcessorFast"):
            try:  # a lazy import may fail on a missing backend (torchvision, PIL): try the next one
                cls = getattr(tf, cls_name)
                proc = cls(size={"shortest_edge": IMAGE_PIXELS[0], "longest_edge": IMAGE_PIXELS[1]}, **common)
                out = proc(images=[rgb[0]], return_tensors="pt")
                return out["pixel_values"].float(), [int(x) for x in out["image_grid_thw"][0]], cls_name
            except Exception as e:  # the next backend
                errors.append(f"{cls_name}: {e!r}")
    else:
        try:
            from transformers import Qwen3VLVideoProcessor
            proc = Qwen3VLVideoProcessor(size={"shortest_edge": VIDEO_PIXELS[0], "longest_edge": VIDEO_PIXELS[1]},
                                         do_sample_frames=False, **common)
            out = proc(videos=[rgb], return_tensors="pt", do_sample_frames=False, cap_pixels_per_frame=False)
            return out["pixel_values_videos"].float(), [int(x) for x in out["video_grid_thw"][0]], "Qwen3VLVideoProcessor"
        except Exception as e:
            errors.append(f"Qwen3VLVideoProcessor: {e!r}")
    t, gh, gw, (rh, rw) = grid_of(name)
    if (rh, rw) != (h, w):
        raise SystemExit(f"{name}: no processor loaded ({errors}) and the item needs a resize")
    log(f"  {name}: processors unavailable ({errors}); patchified by the documented formula")
    return torch.tensor(manual_patchify(pixels_of(name), rh, rw)), [t, gh, gw], "manual (no resize needed)"


def build_prompt(layout, grids, cfg, seed):
    rng = random.Random(seed)
    ids, types = [], []
    for part in layout:
        if isinstance(part, int):
            ids += [rng.randrange(151643) for _ in range(part)]
            types += [0] * part
            continue
        kind = MEDIA[part][0]
        t, gh, gw = grids[part]
        per_frame = gh * gw // (MERGE * MERGE)
        pad = cfg["image_token_id"] if kind == "image" else cfg["video_token_id"]
        for f in range(t):
            if kind == "video":  # "<0.5 seconds>"-like text before each frame pair
                ids += [rng.randrange(151643) for _ in range(3)]
                types += [0] * 3
            ids += [cfg["vision_start_token_id"]] + [pad] * per_frame + [cfg["vision_end_token_id"]]
            types += [0] + [1 if kind == "image" else 2] * per_frame + [0]
    return ids, types


def main():
    ap = argparse.ArgumentParser(description="transformers references for the vision tower (issue 31)")
    ap.add_argument("--fixtures", default=FIXTURES)
    ap.add_argument("--out", help="output root: generality/dense_vl/vision/ goes under it")
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--plan", action="store_true", help="print the cases and sizes (pure Python)")
    args = ap.parse_args()
    if args.plan:
        plan()
        return
    if not args.out:
        ap.error("--out is required")
    sys.path.insert(0, HERE)
    from make_model_fixtures import load_fp32
    import torch
    import transformers
    torch.set_num_threads(args.threads)
    out_dir = os.path.join(args.out, FIXTURE, "vision")
    os.makedirs(out_dir, exist_ok=True)
    logf = open(os.path.join(out_dir, "vision_log.txt"), "w")

    def log(msg):
        print(msg, flush=True)
        logf.write(msg + "\n")

    hf_dir = os.path.join(args.fixtures, FIXTURE, "hf")
    cfg = json.load(open(os.path.join(hf_dir, "config.json")))
    model, info = load_fp32(cfg["architectures"][0], hf_dir)
    if info.get("missing_keys") or [k for k in info.get("unexpected_keys", []) if not k.startswith("mtp.")]:
        raise SystemExit(f"loading reported {info}")
    model64 = copy.deepcopy(model).double()
    doc = {"format": 1, "fixture": FIXTURE, "generated_by": "tests/oracle/make_vision_reference.py",
           "torch": torch.__version__, "transformers": transformers.__version__,
           "compute": "fp32 on CPU from the bf16 weights upcast; eager attention; greedy by full recompute",
           "image_pixels": IMAGE_PIXELS, "video_pixels": VIDEO_PIXELS, "media": {}, "cases": []}
    values, grids = {}, {}
    with torch.no_grad():
        for name in MEDIA:
            pv, grid, source = process(name, log)
            thw = torch.tensor([grid])
            emb = model.model.visual(pv, grid_thw=thw).pooler_output
            emb64 = model64.model.visual(pv.double(), grid_thw=thw).pooler_output
            noise = float((emb.double() - emb64).abs().max())
            kind, frames, h, w, _ = MEDIA[name]
            write_f32(os.path.join(out_dir, f"{name}.pixels.f32"), pv.flatten().tolist())
            write_f32(os.path.join(out_dir, f"{name}.tower.f32"), emb.flatten().tolist())
            with open(os.path.join(out_dir, f"{name}.rgb.u8"), "wb") as f:
                f.write(bytes(v for fr in pixels_of(name) for row in fr for px in row for v in px))
            values[name], grids[name] = (pv, emb), grid
            doc["media"][name] = {"kind": kind, "frames": frames, "height": h, "width": w, "grid_thw": grid,
                                  "processor": source, "pixels_file": f"{name}.pixels.f32",
                                  "tower_file": f"{name}.tower.f32", "rgb_file": f"{name}.rgb.u8",
                                  "tower_rows": int(emb.shape[0]), "tower_fp64_max_abs_diff": noise}
            log(f"  {name}: {source}, grid {grid}, {emb.shape[0]} rows, fp32 vs fp64 {noise:.3g}")

        for ci, (case, layout) in enumerate(CASES):
            ids, types = build_prompt(layout, grids, cfg, 100 + ci)
            images = [n for n in layout if isinstance(n, str) and MEDIA[n][0] == "image"]
            videos = [n for n in layout if isinstance(n, str) and MEDIA[n][0] == "video"]
            kw = {}
            if images:
                kw["pixel_values"] = torch.cat([values[n][0] for n in images])
                kw["image_grid_thw"] = torch.tensor([grids[n] for n in images])
            if videos:
                kw["pixel_values_videos"] = torch.cat([values[n][0] for n in videos])
                kw["video_grid_thw"] = torch.tensor([grids[n] for n in videos])
            x = torch.tensor([ids])
            tt = torch.tensor([types])
            pos, delta = model.model.get_rope_index(x, mm_token_type_ids=tt, image_grid_thw=kw.get("image_grid_thw"),
                                                    video_grid_thw=kw.get("video_grid_thw"))
            seq, greedy, gaps, first = list(ids), [], [], None
            for step in range(GREEDY_STEPS):
                n_new = len(seq) - len(ids)
                logits = model(input_ids=torch.tensor([seq]), mm_token_type_ids=torch.tensor([types + [0] * n_new]),
                               use_cache=False, **kw).logits[0, -1]
                if first is None:
                    first = logits
                top2 = torch.topk(logits, 2)
                greedy.append(int(top2.indices[0]))
                gaps.append(float(top2.values[0] - top2.values[1]))
                seq.append(greedy[-1])
            top = torch.topk(first, TOP_LOGITS)
            entry = {"name": case, "media": [n for n in layout if isinstance(n, str)], "ids": ids,
                     "mm_token_type_ids": types, "position_ids": pos[:, 0, :].tolist(),
                     "rope_delta": int(delta.flatten()[0]), "next_position": int(pos.max()) + 1,
                     "first_top": [[int(i), float(v)] for i, v in zip(top.indices, top.values)],
                     "first_max_abs_logit": float(first.abs().max()), "greedy_tokens": greedy,
                     "greedy_gaps": gaps, "min_gap": min(gaps)}
            doc["cases"].append(entry)
            log(f"  {case}: {len(ids)} ids, next position {entry['next_position']}, greedy {greedy}, "
                f"min gap {min(gaps):.4f}")
    with open(os.path.join(out_dir, "vision_ref.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
