#!/usr/bin/python3
# The reference processor's resize for tests/unit/media/media_resize.cpp (issue 31: "say how far
# FFmpeg's scaler is from the reference processor's and keep the test bound honest about it").
#
# transformers is not installed on the build machine, so the two resize paths of the Qwen2-VL-family
# processors that Qwen3.5/3.6 use (docs/MODEL.md §9: smart_resize to multiples of 32, resample
# BICUBIC, rescale 1/255, normalise with the config's mean/std, patchify with temporal patch 2) are
# reproduced here from first principles with Debian's python3-pil 9.4 and python3-torchvision 0.14:
#   pil  PIL.Image.resize(BICUBIC) on the uint8 RGB image. This is what transformers' PIL backend does
#        (Qwen2VLImageProcessorPil in transformers 5, the "slow" Qwen2VLImageProcessor in 4.x:
#        image_transforms.resize -> to_pil_image -> PIL resize -> back to uint8 numpy).
#   tv   torchvision resize(BICUBIC, antialias=True) on the uint8 CHW tensor, rounded and clamped back
#        to uint8 (the torchvision backend: transformers 5's Qwen2VLImageProcessor, 4.x's
#        Qwen2VLImageProcessorFast, TorchvisionBackend.resize; and Qwen3VLVideoProcessor for video,
#        which has no PIL path). torchvision 0.14's functional.resize and transformers 5's
#        transforms.v2.functional.resize both interpolate uint8 bicubic in float32 and round.
# Which one a user gets: the shared reference docs (docs/MODEL.md §9) do not say. transformers'
# source says: 4.5x forced the fast (torchvision) processor for Qwen2VLImageProcessor
# (FORCE_FAST_IMAGE_PROCESSOR in image_processing_auto.py); transformers 5 builds image processors
# on the torchvision backend by default, the PIL one being a separate class / backend="pil". That
# was read, not run: transformers is not here. `--check-transformers` (where it is installed, e.g.
# the GPU machine) runs both of its backends on the same sources and compares with these files.
# As a cross-check the filter is also written out here (separable a = -0.5 cubic, widened when
# shrinking): in floats it must equal torchvision's output, with its horizontal pass rounded and
# clipped to 8 bits PIL's within a level (reference.json: written_out_*_levels).
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
# and reference.json (geometry, files, and the pil-vs-tv distance in 8-bit levels).
#   /usr/bin/python3 tests/oracle/make_resize_reference.py            # regenerate (needs ffmpeg CLI)
#   /usr/bin/python3 tests/oracle/make_resize_reference.py --check     # recompute, compare with files
#   python3 tests/oracle/make_resize_reference.py --check-transformers # also transformers' processors
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


def resize_tv(frame, h, w):
    import torch
    import torchvision.transforms.functional as TF
    t = torch.from_numpy(np.array(frame)).permute(2, 0, 1).contiguous()
    out = TF.resize(t, [h, w], interpolation=TF.InterpolationMode.BICUBIC, antialias=True)
    if out.dtype != torch.uint8:
        raise SystemExit("torchvision returned " + str(out.dtype))
    return out.permute(1, 2, 0).numpy()


def cubic_weights(insz, outsz, a=-0.5):
    """Rows of a separable a = -0.5 cubic resize, support widened by the scale when shrinking
    (antialias), pixel centres aligned: the filter PIL and torchvision's antialiased path use."""
    scale = insz / outsz
    widen = max(scale, 1.0)
    out = np.zeros((outsz, insz))
    for i in range(outsz):
        centre = (i + 0.5) * scale
        lo = int(max(0, np.floor(centre - 2 * widen + 0.5)))
        hi = int(min(insz, np.floor(centre + 2 * widen + 0.5)))
        t = np.abs((np.arange(lo, hi) - centre + 0.5) / widen)
        k = np.where(t < 1, ((a + 2) * t - (a + 3)) * t * t + 1, np.where(t < 2, (((t - 5) * t + 8) * t - 4) * a, 0))
        out[i, lo:hi] = k / k.sum()
    return out


def separable(frame, h, w, eight_bit_pass):
    """The resize written out: horizontal pass, then vertical; eight_bit_pass rounds and clips the
    horizontal result to uint8 first (PIL does; torchvision keeps floats)."""
    x = np.einsum("ox,yxc->yoc", cubic_weights(frame.shape[1], w), frame.astype(np.float64))
    if eight_bit_pass:
        x = np.clip(np.rint(x), 0, 255)
    return np.clip(np.rint(np.einsum("oy,yxc->oxc", cubic_weights(frame.shape[0], h), x)), 0, 255).astype(np.uint8)


def normalised(frames_u8):
    """The model's input values: rescale 1/255 then (x - mean) / std, float32."""
    x = np.stack(frames_u8).astype(np.float32) * np.float32(1 / 255)
    return (x - np.array(MEAN, np.float32)) / np.array(STD, np.float32)


def levels(a, b):
    d = np.abs(a.astype(np.int32) - b.astype(np.int32))
    return {"mean": round(float(d.mean()), 4), "max": int(d.max())}


def build(check_only):
    import torch
    import torchvision
    os.makedirs(OUT, exist_ok=True)
    manifest = {"generator": "tests/oracle/make_resize_reference.py",
                "versions": {"PIL": Image.__version__, "torchvision": torchvision.__version__,
                             "torch": torch.__version__},
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
        if "pil" in refs:
            case["pil_vs_tv_levels"] = levels(refs["pil"], refs["tv"])
        # The same filter written out here, as a cross-check of both libraries' outputs.
        case["written_out_vs_tv_levels"] = levels(np.stack([separable(f, h, w, False) for f in src]), refs["tv"])
        if "pil" in refs:
            case["written_out_8bit_vs_pil_levels"] = levels(np.stack([separable(f, h, w, True) for f in src]), refs["pil"])
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


def check_transformers():
    """Runs transformers' own processors on the sources and compares with the stored references."""
    import transformers as tf
    with open(os.path.join(OUT, "reference.json")) as fh:
        manifest = json.load(fh)
    common = dict(patch_size=PATCH, temporal_patch_size=TEMPORAL, merge_size=MERGE,
                  image_mean=list(MEAN), image_std=list(STD))
    worst = 0.0
    for case in manifest["cases"]:
        src = read_source(case["source"], case["kind"], case["frames"], case["width"], case["height"])
        h, w = case["resized_height"], case["resized_width"]
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
