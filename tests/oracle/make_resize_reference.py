#!/usr/bin/python3
# The reference processor's resize for tests/unit/media/media_resize.cpp (issue 31: "say how far
# FFmpeg's scaler is from the reference processor's and keep the test bound honest about it").
#
# transformers is not installed on the build machine, so the two resize paths of the Qwen2-VL-family
# processors that Qwen3.5/3.6 use (docs/MODEL.md §9: smart_resize to multiples of 32, resample
# BICUBIC, rescale 1/255, normalise with the config's mean/std, patchify with temporal patch 2) are
# reproduced here:
#   pil  PIL.Image.resize(BICUBIC) on the uint8 RGB image (Debian's python3-pil 9.4): transformers'
#        PIL backend (Qwen2VLImageProcessorPil in transformers 5, the "slow" Qwen2VLImageProcessor
#        of 4.x: image_transforms.resize -> to_pil_image -> PIL resize -> back to uint8 numpy).
#   tv   the torchvision backend, transformers 5's default (Qwen2VLImageProcessor; and
#        Qwen3VLVideoProcessor for video, which has no PIL path): TorchvisionBackend.resize calls
#        torchvision.transforms.v2.functional.resize(BICUBIC, antialias=True) on the uint8 tensor.
#        On the CPU, current torchvision hands uint8 straight to torch.nn.functional.interpolate
#        (v2 resize_image: uint8 is an "acceptable dtype" for BICUBIC on cpu), and current PyTorch
#        runs its native uint8 kernel (_upsample_bicubic2d_aa -> upsample_avx_bilinear_bicubic_uint8,
#        a port of Pillow's ImagingResample; both read in their sources, not run here): horizontal
#        pass into 8 bits, then vertical; int16 weights at one precision per pass.
#        Debian's torch 1.13 has no uint8 kernel ("compute_indices_weights_aa" not implemented for
#        'Byte'); its torchvision 0.14 casts to float32, resizes, clamps and rounds, keeping the
#        horizontal pass in floats. That is up to 23 levels away next to sharp edges (the cubic's
#        overshoot is not cut between the passes); the references before 2026-12-07 were that, and
#        --check-transformers on transformers 5.17 / torch 2.11 showed the difference. transformers
#        still computes the float path where the tensors are on a CUDA device (reference.json
#        records its distance: float_vs_tv_levels).
# So the kernel is written out here in integer numpy (resize_u8, from PyTorch's source: the taps,
# Keys' cubic a = -0.5 widened by the scale when shrinking, weights normalised in double and
# quantised to int16 at the largest precision <= 22 bits that keeps the largest weight under 2^15,
# rounding offset 1 << (p-1), floor shift, clamp to 0..255). Pillow's ImagingResample is the same
# kernel at 22 bits in both passes: resize_u8 with that precision must equal PIL's output to the
# bit, which checks everything but the precision rule against a real library on every case (the
# two differ by a level on a few pixels: pil_vs_tv_levels). `--check-transformers` (where
# transformers is installed, e.g. the GPU machine) compares the files with transformers' own
# processors and resize_u8 with the installed torch's uint8 interpolate.
# After the resize both paths hold uint8 pixels, so the model's input is (u/255 - mean)/std of
# them: the files store those uint8 pixels, exactly.
#
# Cases (generated here, deterministic; bounds small so the files stay small: the resize only
# depends on the scale ratios, which these cover):
#   exact  64x64 PNG, already a multiple of 32 within the bounds: no resize (both references = source)
#   down   150x100 PNG -> 96x64 (x0.64, over max pixels)
#   up     30x24 PNG -> 64x64 (x2.1 / x2.7, under min pixels)
#   tall   37x200 PNG -> 32x192 (odd aspect ratio, non-integer ratios on both axes)
#   photo  100x70 JPEG (quality 90, 4:2:0) -> 96x64: the reference decodes it with PIL, as
#          transformers' load_image does; FFmpeg's JPEG decoder and chroma upsampling add to the distance
#   alpha  36x30 RGBA PNG (alpha ramps 0..255 along x, a transparent hole) -> 64x64: transformers'
#          convert_to_rgb composites it on white (PIL alpha_composite) before the resize
#   pair   2 frames 90x60, lossless H.264 RGB (libx264rgb -qp 0, decoded as planar GBR) -> 96x64
#          through the video path (tv only)
# Image bounds 2048..8192 px, video 4096..16384 px x frames; patch 16, merge 2, temporal 2.
#
# Writes into tests/fixtures/media/resize/: the sources, <case>.<ref>.rgb (uint8, frames x H x W x 3)
# and reference.json (geometry, files, the pil-vs-tv and float-vs-tv distances in 8-bit levels).
#   /usr/bin/python3 tests/oracle/make_resize_reference.py            # regenerate (needs ffmpeg CLI)
#   /usr/bin/python3 tests/oracle/make_resize_reference.py --check     # recompute, compare with files
#   python3 tests/oracle/make_resize_reference.py --check-transformers # transformers' processors, torch's kernel
import argparse
import json
import os
import subprocess
import sys

import shutil

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_vision_reference import smart_resize  # noqa: E402  (transformers' arithmetic, frames >= 2 for video)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "fixtures", "media", "resize")
PATCH, MERGE, TEMPORAL = 16, 2, 2
FACTOR = PATCH * MERGE
IMAGE_PIXELS = (2048, 8192)
VIDEO_PIXELS = (2 * 2048, 2 * 8192)
MEAN = STD = (0.5, 0.5, 0.5)

CASES = [  # name, kind, source file, frames, width, height, seed
    ("exact", "image", "exact.png", 1, 64, 64, 1),
    ("down", "image", "down.png", 1, 150, 100, 2),
    ("up", "image", "up.png", 1, 30, 24, 3),
    ("tall", "image", "tall.png", 1, 37, 200, 4),
    ("photo", "image", "photo.jpg", 1, 100, 70, 5),
    ("alpha", "image", "alpha.png", 1, 36, 30, 7),
    ("pair", "video", "pair.mp4", 2, 90, 60, 6),
]


def pattern(width, height, seed, frame=0):
    """A picture with smooth areas, sharp edges, fine periodic detail and noise; channels differ."""
    rng = np.random.default_rng(seed * 100 + frame)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    u, v = x / max(width - 1, 1), y / max(height - 1, 1)
    r = 40 + 170 * u + 30 * np.sin(2 * np.pi * (x + 3 * frame) / 5.3)
    g = 200 - 150 * v + 25 * np.cos(2 * np.pi * (x + y) / 9.1)
    b = 60 + 120 * u * v
    disc = (x - 0.6 * width) ** 2 + (y - 0.4 * height) ** 2 < (0.22 * min(width, height)) ** 2
    r[disc], g[disc], b[disc] = 250, 30, 20
    block = (x > 0.15 * width) & (x < 0.4 * width) & (y > 0.55 * height) & (y < 0.85 * height)
    r[block], g[block], b[block] = 10, 20, 240
    stripes = (y > 0.1 * height) & (y < 0.3 * height) & ((x.astype(int) // 2) % 2 == 0)
    r[stripes] = g[stripes] = b[stripes] = 255
    img = np.stack([r, g, b], axis=-1) + rng.normal(0, 3, (height, width, 3))
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def write_sources(name, kind, file, frames, width, height, seed):
    """Writes the source file; returns the frames as transformers would see them (uint8 HxWx3)."""
    path = os.path.join(OUT, file)
    pix = [pattern(width, height, seed, f) for f in range(frames)]
    if name == "alpha":
        y, x = np.mgrid[0:height, 0:width]
        a = np.rint(255 * x / (width - 1)).astype(np.uint8)
        a[(abs(y - height // 2) < 4) & (abs(x - width // 2) < 5)] = 0
        Image.fromarray(np.dstack([pix[0], a]), "RGBA").save(path, optimize=True)
        with Image.open(path) as im:
            return [np.asarray(convert_to_rgb(im))]
    if file.endswith(".png"):
        Image.fromarray(pix[0]).save(path, optimize=True)
    elif file.endswith(".jpg"):
        Image.fromarray(pix[0]).save(path, quality=90, subsampling="4:2:0")
        with Image.open(path) as im:  # transformers' load_image: PIL decodes it, then convert("RGB")
            return [np.asarray(im.convert("RGB"))]
    else:
        cmd = ["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24",
               "-s", f"{width}x{height}", "-r", "2", "-i", "-", "-c:v", "libx264rgb", "-qp", "0",
               "-preset", "veryslow", "-map_metadata", "-1", "-fflags", "+bitexact", path]
        subprocess.run(cmd, input=b"".join(p.tobytes() for p in pix), check=True)
        back = subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-i", path, "-f", "rawvideo",
                               "-pix_fmt", "rgb24", "-"], check=True, capture_output=True).stdout
        if back != b"".join(p.tobytes() for p in pix):
            raise SystemExit(f"{file}: the H.264 RGB encode is not lossless")
    return pix


def convert_to_rgb(im):
    """transformers' image_transforms.convert_to_rgb for a PIL image: alpha over white."""
    if im.mode == "RGB":
        return im
    rgba = im.convert("RGBA")
    return Image.alpha_composite(Image.new("RGBA", rgba.size, (255, 255, 255)), rgba).convert("RGB")


def resize_pil(frame, h, w):
    return np.asarray(Image.fromarray(frame).resize((w, h), resample=Image.BICUBIC))


def keys_cubic(x, a=-0.5):
    """Keys' cubic in PyTorch's operation order (cubic_convolution1/2)."""
    x = abs(x)
    if x < 1.0:
        return ((a + 2) * x - (a + 3)) * x * x + 1
    if x < 2.0:
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return 0.0


def taps_u8(insz, outsz, precision):
    """Per output pixel (first input, int weights) and the precision: PyTorch's
    _compute_weights_aa + _compute_indices_int16_weights_aa (precision None), or Pillow's
    precompute_coeffs + normalize_coeffs_8bpc (precision 22)."""
    scale = insz / outsz
    widen = max(scale, 1.0)
    support = 2.0 * widen
    inv = 1.0 / scale if scale >= 1.0 else 1.0
    kmax = int(np.ceil(support)) * 2 + 1
    rows = []
    for i in range(outsz):
        centre = scale * (i + 0.5)
        lo = max(int(centre - support + 0.5), 0)  # int() truncates towards zero, as the C casts do
        n = max(0, min(min(int(centre + support + 0.5), insz) - lo, kmax))
        w = [keys_cubic((j + lo - centre + 0.5) * inv) for j in range(n)]
        total = sum(w)
        rows.append((lo, [v / total for v in w] if total != 0 else w))
    if precision is None:  # the largest weight must fit 15 bits
        w_max = max(max(w) for _, w in rows if w)
        precision = 0
        while precision < 22 and int(0.5 + w_max * (1 << (precision + 1))) < (1 << 15):
            precision += 1
    q = [(lo, [int(-0.5 + v * (1 << precision)) if v < 0 else int(0.5 + v * (1 << precision)) for v in w])
         for lo, w in rows]
    return q, precision


def resize_pass(x, outsz, axis, precision):
    """One 8-bit pass along axis (1: horizontal, 0: vertical) of an HxWx3 uint8 frame."""
    taps, p = taps_u8(x.shape[axis], outsz, precision)
    src = np.moveaxis(x.astype(np.int64), axis, 0)
    out = np.empty((outsz,) + src.shape[1:], np.int64)
    for i, (lo, k) in enumerate(taps):
        acc = np.full(src.shape[1:], 1 << (p - 1), np.int64)
        for j, kj in enumerate(k):
            acc += kj * src[lo + j]
        out[i] = np.clip(acc >> p, 0, 255)
    return np.moveaxis(out, 0, axis).astype(np.uint8)


def resize_u8(frame, h, w, precision=None):
    """The integer bicubic: horizontal pass if the width changes, then vertical if the height does.
    precision None: PyTorch's uint8 kernel (the tv reference); 22: Pillow's."""
    x = np.asarray(frame)
    if w != x.shape[1]:
        x = resize_pass(x, w, 1, precision)
    if h != x.shape[0]:
        x = resize_pass(x, h, 0, precision)
    return x


def resize_tv(frame, h, w):
    return resize_u8(frame, h, w)


def resize_float(frame, h, w):
    """torchvision's resize of a float32 tensor then clamped and rounded to uint8: Debian's
    torchvision 0.14 for uint8, and transformers' torchvision backend on a CUDA device."""
    import torch
    t = torch.from_numpy(np.array(frame)).permute(2, 0, 1)[None].float()
    out = torch.nn.functional.interpolate(t, size=[h, w], mode="bicubic", align_corners=False, antialias=True)
    return out.clamp(0, 255).round().to(torch.uint8)[0].permute(1, 2, 0).numpy()


def normalised(frames_u8):
    """The model's input values: rescale 1/255 then (x - mean) / std, float32."""
    x = np.stack(frames_u8).astype(np.float32) * np.float32(1 / 255)
    return (x - np.array(MEAN, np.float32)) / np.array(STD, np.float32)


def levels(a, b):
    d = np.abs(a.astype(np.int32) - b.astype(np.int32))
    return {"mean": round(float(d.mean()), 4), "max": int(d.max())}


def build(check_only):
    import torch
    os.makedirs(OUT, exist_ok=True)
    manifest = {"generator": "tests/oracle/make_resize_reference.py",
                "versions": {"PIL": Image.__version__, "numpy": np.__version__, "torch (float_vs_tv only)": torch.__version__},
                "tv": "PyTorch's native uint8 antialiased bicubic (transformers 5's default torchvision backend on the "
                      "CPU), written out in integer numpy",
                "patch_size": PATCH, "merge_size": MERGE, "temporal_patch_size": TEMPORAL,
                "image_pixels": IMAGE_PIXELS, "video_pixels": VIDEO_PIXELS, "mean": MEAN, "std": STD,
                "cases": []}
    mismatches = 0
    for name, kind, file, frames, width, height, seed in CASES:
        if check_only:
            src = read_source(file, kind, frames, width, height)
        else:
            src = write_sources(name, kind, file, frames, width, height, seed)
        lo, hi = IMAGE_PIXELS if kind == "image" else VIDEO_PIXELS
        h, w = smart_resize(height, width, FACTOR, lo, hi, frames if kind == "video" else 1)
        refs = {"tv": np.stack([resize_tv(f, h, w) for f in src])}
        if kind == "image":
            refs["pil"] = np.stack([resize_pil(f, h, w) for f in src])
        case = {"name": name, "kind": kind, "source": file, "frames": frames, "width": width, "height": height,
                "resized_width": w, "resized_height": h, "references": {}}
        shared = "pil" in refs and np.array_equal(refs["pil"], refs["tv"])
        for ref, pix in refs.items():
            fname = f"{name}.rgb" if shared else f"{name}.{ref}.rgb"  # one file where both agree
            path = os.path.join(OUT, fname)
            if check_only:
                with open(path, "rb") as fh:
                    same = fh.read() == pix.tobytes()
                print(f"{fname}: {'same' if same else 'DIFFERENT'}")
                mismatches += not same
            else:
                with open(path, "wb") as fh:
                    fh.write(pix.tobytes())
            case["references"][ref] = fname
        # The written-out kernel at Pillow's precision must be Pillow's output, to the bit.
        if not np.array_equal(np.stack([resize_u8(f, h, w, 22) for f in src]),
                              refs["pil"] if "pil" in refs else np.stack([resize_pil(f, h, w) for f in src])):
            raise SystemExit(f"{name}: resize_u8 at 22 bits differs from PIL's BICUBIC: the written-out kernel is wrong")
        if "pil" in refs:
            case["pil_vs_tv_levels"] = levels(refs["pil"], refs["tv"])
        case["float_vs_tv_levels"] = levels(np.stack([resize_float(f, h, w) for f in src]), refs["tv"])
        if (h, w) == (height, width) and kind == "image":
            for ref, pix in refs.items():
                if not np.array_equal(pix[0], src[0]):
                    raise SystemExit(f"{name}: the {ref} resize to the same size is not the identity")
        manifest["cases"].append(case)
        print(f"{name}: {width}x{height} -> {w}x{h}", {k: v for k, v in case.items() if k.endswith("_levels")})
    if not check_only:
        with open(os.path.join(OUT, "reference.json"), "w") as fh:
            json.dump(manifest, fh, indent=1)
            fh.write("\n")
    return mismatches


def read_source(file, kind, frames, width, height):
    path = os.path.join(OUT, file)
    if kind == "image":
        with Image.open(path) as im:
            return [np.asarray(convert_to_rgb(im))]
    if not shutil.which("ffmpeg"):  # the GPU machine: the frames the lossless file holds, regenerated
        print(f"{file}: no ffmpeg here; using the generated frames it was encoded from")
        seed = next(c[6] for c in CASES if c[2] == file)
        return [pattern(width, height, seed, f) for f in range(frames)]
    raw = subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-i", path, "-f", "rawvideo",
                          "-pix_fmt", "rgb24", "-"], check=True, capture_output=True).stdout
    return list(np.frombuffer(raw, np.uint8).reshape(frames, height, width, 3))


def image_processor(tf, ref, **kwargs):
    """transformers' Qwen2-VL image processor of the backend `ref` names (pil / tv), by its own word."""
    names = ["Qwen2VLImageProcessorPil", "Qwen2VLImageProcessor"] if ref == "pil" else \
        ["Qwen2VLImageProcessor", "Qwen2VLImageProcessorFast"]
    errors = []
    for name in names:
        try:  # a backend whose library is missing fails on use (transformers' dummy objects)
            proc = getattr(tf, name)(**kwargs)
        except Exception as e:
            errors.append(f"{name}: {e!r}")
            continue
        backend = getattr(proc, "backend", None)  # transformers 5; 4.x: the class name says it
        backend = backend or ("torchvision" if name.endswith("Fast") else "pil")
        if backend == ("pil" if ref == "pil" else "torchvision"):
            return proc
    raise SystemExit(f"transformers {tf.__version__} has no {ref} backend for Qwen2-VL images: {errors}")


def torch_u8_resize(frame, h, w):
    """The installed torch's own uint8 bicubic with antialias (CPU), or None where it has none."""
    import torch
    t = torch.from_numpy(np.array(frame)).permute(2, 0, 1)[None]
    try:
        out = torch.nn.functional.interpolate(t, size=[h, w], mode="bicubic", align_corners=False, antialias=True)
    except RuntimeError:
        return None
    return out[0].permute(1, 2, 0).numpy()


def check_transformers():
    """Runs transformers' own processors on the sources and compares with the stored references;
    also resize_u8 with the installed torch's uint8 kernel, frame by frame."""
    import torch
    import transformers as tf
    with open(os.path.join(OUT, "reference.json")) as fh:
        manifest = json.load(fh)
    common = dict(patch_size=PATCH, temporal_patch_size=TEMPORAL, merge_size=MERGE,
                  image_mean=list(MEAN), image_std=list(STD))
    print(f"transformers {tf.__version__}, torch {torch.__version__}, CPU capability "
          f"{torch.backends.cpu.get_cpu_capability() if hasattr(torch.backends, 'cpu') else '?'}")
    worst = 0.0
    for case in manifest["cases"]:
        src = read_source(case["source"], case["kind"], case["frames"], case["width"], case["height"])
        h, w = case["resized_height"], case["resized_width"]
        native = [torch_u8_resize(f, h, w) for f in src]
        if native[0] is None:
            print(f"{case['name']}: this torch has no uint8 bicubic kernel")
        else:
            d = max(int(np.abs(n.astype(np.int32) - resize_u8(f, h, w).astype(np.int32)).max()) for n, f in zip(native, src))
            print(f"{case['name']}: resize_u8 vs torch's uint8 interpolate: max |diff| = {d} levels")
            worst = max(worst, float(d))
        for ref, fname in case["references"].items():
            with open(os.path.join(OUT, fname), "rb") as fh:
                want_u8 = np.frombuffer(fh.read(), np.uint8).reshape(-1, h, w, 3)
            want = normalised(list(want_u8))  # [F, H, W, 3]
            if case["kind"] == "image":
                proc = image_processor(tf, ref, size={"shortest_edge": IMAGE_PIXELS[0],
                                                      "longest_edge": IMAGE_PIXELS[1]}, **common)
                got = proc(images=[src[0]], return_tensors="pt")["pixel_values"]
                want = np.concatenate([want, want])  # a still image is its frame twice
            else:
                proc = tf.Qwen3VLVideoProcessor(size={"shortest_edge": VIDEO_PIXELS[0],
                                                      "longest_edge": VIDEO_PIXELS[1]}, **common)
                got = proc(videos=[np.stack(src)], return_tensors="pt", do_sample_frames=False,
                           cap_pixels_per_frame=False)["pixel_values_videos"]
            # transformers' patch order: (t, h/P/M, w/P/M, M, M) rows of (c, tt, P, P).
            gh, gw, t = h // PATCH, w // PATCH, want.shape[0] // TEMPORAL
            rows = want.reshape(t, TEMPORAL, gh // MERGE, MERGE, PATCH, gw // MERGE, MERGE, PATCH, 3)
            rows = rows.transpose(0, 2, 5, 3, 6, 8, 1, 4, 7).reshape(t * gh * gw, -1)
            d = float(np.abs(got.float().numpy() - rows).max())
            worst = max(worst, d)
            print(f"{case['name']}.{ref} vs {type(proc).__name__}: max |diff| = {d:.3g} (normalised units)")
    print(f"worst {worst:.3g}: {'the references are what transformers computes' if worst < 1e-5 else 'MISMATCH'}")
    return worst >= 1e-5


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--check", action="store_true", help="recompute from the committed sources and compare")
    ap.add_argument("--check-transformers", action="store_true", help="compare with transformers' processors")
    args = ap.parse_args()
    if args.check_transformers:
        sys.exit(1 if check_transformers() else 0)
    sys.exit(1 if build(args.check) else 0)


if __name__ == "__main__":
    main()
