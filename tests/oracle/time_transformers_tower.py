#!/usr/bin/env python3
# ninfer - how long transformers' own Qwen3.5 vision tower takes on this machine's GPU for the inputs
# that `ninferctl bench --image WxH` / `--video SECONDS --frame WxH` time for ninfer's tower (issue 31:
# "the tower no slower than transformers' tower on the same GPU and inputs").
#
# The tower is built from the real vision_config of docs/MODEL.md §2.2 (depth 27, hidden 1152, 16 heads,
# intermediate 4304, patch 16, temporal patch 2, merge 2, a 48 x 48 position table, out_hidden_size
# 5120 for the 27B or 2048 for the 35B-A3B) with random weights in bf16 (timing does not depend on
# the values), and fed random patches of the grid ninfer's bench uses: an image of W x H pixels is
# (1, H/16, W/16) patches; a video of S seconds at 2 frames/s is (S, H/16, W/16) (one temporal patch
# per frame pair). W and H must be multiples of 32 (the tower's input, as ninfer's bench requires).
# Each case runs --warmup times, then --repeat times; the median wall time (CUDA synchronised) is
# printed with the patches and merged tokens, one line per case, and as JSON with --json.
#
# Usage (GPU machine; transformers 5.x, PyTorch with CUDA):
#   python3 tests/oracle/time_transformers_tower.py [--out-hidden 5120] [--image 1024x1024]...
#       [--video 30 --frame 832x480]... [--attn sdpa|eager] [--repeat 5] [--json FILE]
import argparse
import json
import statistics
import sys
import time

VISION = dict(depth=27, hidden_size=1152, num_heads=16, intermediate_size=4304, patch_size=16,
              temporal_patch_size=2, spatial_merge_size=2, num_position_embeddings=2304, in_channels=3,
              hidden_act="gelu_pytorch_tanh")


def size_arg(text):
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WxH, got {text!r}")
    if w <= 0 or h <= 0 or w % 32 or h % 32:
        raise argparse.ArgumentTypeError(f"{text}: width and height must be positive multiples of 32")
    return w, h


def build_tower(out_hidden, attn, device, dtype):
    """transformers' vision tower of the real shapes: the tower class itself where the module names it,
    else the multimodal model's .model.visual (with a one-layer text model that is never run)."""
    import torch
    import transformers as tf
    vision = tf.Qwen3_5Config().vision_config.__class__(**VISION, out_hidden_size=out_hidden)
    from transformers.models.qwen3_5 import modeling_qwen3_5 as m
    cls = getattr(m, "Qwen3_5VisionModel", None)
    if cls is not None:
        tower = cls._from_config(vision, attn_implementation=attn)
    else:
        text = dict(vocab_size=1024, hidden_size=out_hidden, num_hidden_layers=1, layer_types=["full_attention"],
                    num_attention_heads=8, num_key_value_heads=2, head_dim=256, intermediate_size=64)
        cfg = tf.Qwen3_5Config(text_config=text, vision_config=vision.to_dict())
        model = tf.Qwen3_5ForConditionalGeneration._from_config(cfg, attn_implementation=attn)
        tower = model.model.visual
    torch.manual_seed(0)
    with torch.no_grad():
        for p in tower.parameters():
            p.normal_(0, 0.02)
    return tower.to(device=device, dtype=dtype).eval(), cls.__name__ if cls is not None else "Qwen3_5ForConditionalGeneration.model.visual"


def time_case(tower, grid, warmup, repeat, device, dtype):
    import torch
    t, gh, gw = grid
    patch_dim = VISION["in_channels"] * VISION["temporal_patch_size"] * VISION["patch_size"] ** 2
    pixels = torch.randn(t * gh * gw, patch_dim, device=device, dtype=dtype)
    thw = torch.tensor([grid], device=device)
    times = []
    with torch.no_grad():
        for i in range(warmup + repeat):
            torch.cuda.synchronize()
            start = time.perf_counter()
            out = tower(pixels, grid_thw=thw)
            torch.cuda.synchronize()
            if i >= warmup:
                times.append((time.perf_counter() - start) * 1e3)
    rows = getattr(out, "pooler_output", out)
    rows = rows[0] if isinstance(rows, (tuple, list)) else rows
    merged = t * gh * gw // VISION["spatial_merge_size"] ** 2
    if rows.shape[0] != merged:
        raise SystemExit(f"tower returned {tuple(rows.shape)} rows, expected {merged} merged tokens")
    return statistics.median(times), min(times), merged


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out-hidden", type=int, default=5120, help="out_hidden_size: 5120 (27B) or 2048 (35B-A3B)")
    ap.add_argument("--image", type=size_arg, action="append", default=[], metavar="WxH")
    ap.add_argument("--video", type=float, action="append", default=[], metavar="SECONDS")
    ap.add_argument("--frame", type=size_arg, default=(832, 480), metavar="WxH", help="video frame size (832x480: a 720p clip as the video processor resizes it, ninferctl bench's default)")
    ap.add_argument("--attn", default="sdpa", choices=["sdpa", "eager"], help="transformers' attention (sdpa)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    if not args.image and not args.video:
        args.image = [(1024, 1024)]
        args.video = [30.0]
    import torch
    import transformers
    if not torch.cuda.is_available():
        sys.exit("time_transformers_tower: no CUDA device")
    device, dtype = "cuda", torch.bfloat16
    tower, built = build_tower(args.out_hidden, args.attn, device, dtype)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name()}, "
          f"{built}, attention {args.attn}, bf16, out_hidden {args.out_hidden}")
    cases = [("image", f"{w}x{h}", (1, h // 16, w // 16)) for w, h in args.image]
    for seconds in args.video:
        pairs = max(1, round(seconds * 2 / VISION["temporal_patch_size"]))
        w, h = args.frame
        cases.append(("video", f"{seconds:g} s of {w}x{h} at 2 fps", (pairs, h // 16, w // 16)))
    results = []
    for kind, label, grid in cases:
        median, best, merged = time_case(tower, grid, args.warmup, args.repeat, device, dtype)
        patches = grid[0] * grid[1] * grid[2]
        print(f"{kind} {label}: grid {grid}, {patches} patches -> {merged} tokens: median {median:.2f} ms "
              f"(best {best:.2f}) over {args.repeat}")
        results.append(dict(kind=kind, label=label, grid_thw=list(grid), patches=patches, tokens=merged,
                            median_ms=round(median, 3), best_ms=round(best, 3)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(transformers=transformers.__version__, device=torch.cuda.get_device_name(),
                           attention=args.attn, out_hidden=args.out_hidden, cases=results), f, indent=1)


if __name__ == "__main__":
    main()
