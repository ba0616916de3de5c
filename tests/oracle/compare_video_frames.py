#!/usr/bin/python3
# Our decoded video frames against the ones transformers' video loaders hand its processor
# (issue 31: "YUV video frames against transformers' video loader").
#
# transformers' Qwen3-VL video path decodes with PyAV (read_video_pyav: frame.to_ndarray(format=
# "rgb24")), torchvision (read_video: PyAV's to_rgb().to_ndarray()) or torchcodec, all through
# FFmpeg's swscale at the frame's own size, then resizes the RGB frames with torchvision's uint8
# bicubic (resize_u8 of make_resize_reference.py, PyTorch's kernel to the bit). Where they differ
# is the colour matrix of the YUV -> RGB step:
#   pyav      Debian 12's PyAV 10 (and torchvision 0.14 over it): VideoReformatter leaves swscale's
#             default matrix, BT.601, whatever the stream says;
#   pyav_tag  the frame's own tag: PyAV >= 14 hands the frame to sws_scale_frame, which reads its
#             colorspace (BT.709 for a tagged HD clip; an untagged one stays BT.601), as torchcodec
#             and the ffmpeg CLI's scale filter do. Emulated here with PyAV 10's reformat(
#             src_colorspace=the tag), the same swscale call with the tag's coefficients.
# A float model (limited range, BT.601 and BT.709, chroma repeated) names the matrix each one used.
#
# Clips (made here with the ffmpeg CLI, 2 s of testsrc2 at 1280x720, 30 fps, H.264 yuv420p):
#   bt709     encoded with the BT.709 matrix and tagged so (colorspace, primaries, trc; tv range)
#   untagged  encoded with swscale's default (BT.601), no colour tags
# Our frames come from oracle_dump_video_frames (tests/oracle/dump_video_frames.cpp): core/media's
# decode of the processor's sampled frames (2 fps: 4 of the 60), once at the source size (the
# colour conversion alone) and once resized as the processor does (720 -> 704 rows).
# Reported per clip: max / mean absolute difference per channel (R, G, B) in 8-bit levels, before
# and after the resize. --check exits 1 unless ours equals the pyav_tag reference within 1 level
# (max) before and after the resize.
#   /usr/bin/python3 tests/oracle/compare_video_frames.py --dump build/tests/oracle_dump_video_frames [--check]
# --loaders (for the GPU machine: transformers installed, no ffmpeg CLI or build needed) decodes the
# committed tests/fixtures/media/colour_*.mp4 (64x64, written straight in Y'CbCr: BT.709 limited,
# BT.709 full range, untagged; make_fixtures.sh) with transformers' load_video (its default
# backend, then each backend by name) and PyAV, and says which conversion each loader's pixels
# match (the exact BT.601 / BT.709 conversion of the stored values, limited or full range): the
# matrix transformers' own video path uses there, which tests/unit/media/media_decode.cpp pins
# ninfer to (the tag).
#   python3 tests/oracle/compare_video_frames.py --loaders
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

FF = ["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
      "testsrc2=size=1280x720:rate=30:duration=2"]
CLIPS = {
    "bt709": ["-vf", "scale=out_color_matrix=bt709:out_range=tv,format=yuv420p", "-colorspace", "bt709",
              "-color_primaries", "bt709", "-color_trc", "bt709", "-color_range", "tv"],
    "untagged": ["-vf", "format=yuv420p"],
}
MATRICES = {"601": (0.299, 0.114), "709": (0.2126, 0.0722)}


def make_clip(name, path):
    subprocess.run(FF + CLIPS[name] + ["-c:v", "libx264", "-preset", "veryfast", "-crf", "18", path], check=True)


def stream_colorspace(path):
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=color_space",
                          "-of", "json", path], capture_output=True, text=True, check=True).stdout
    return json.loads(out)["streams"][0].get("color_space", "unknown")


def pyav_frames(path, indices, tag):
    """The sampled frames as PyAV gives them: default matrix, or the stream's tag (pyav_tag)."""
    import av
    want = set(indices)
    plain, tagged, yuv = {}, {}, {}
    with av.open(path) as c:
        for i, f in enumerate(c.decode(video=0)):
            if i not in want:
                continue
            plain[i] = f.to_ndarray(format="rgb24")
            if tag == "bt709":
                tagged[i] = f.reformat(format="rgb24", src_colorspace="ITU709", dst_colorspace="ITU601").to_ndarray()
            else:
                tagged[i] = plain[i]
            yuv[i] = f.to_ndarray(format="yuv420p")
    return [plain[i] for i in indices], [tagged[i] for i in indices], [yuv[i] for i in indices]


def torchvision_frames(path, indices):
    import torchvision
    video, _, _ = torchvision.io.read_video(path, pts_unit="sec", output_format="THWC")
    return [video[i].numpy() for i in indices]


def float_model(yuv, matrix):
    """Exact limited-range YUV -> RGB of a yuv420p frame (chroma repeated 2x2), clipped, float."""
    kr, kb = MATRICES[matrix]
    h = yuv.shape[0] * 2 // 3
    w = yuv.shape[1]
    y = yuv[:h].astype(np.float64)
    u = yuv[h:h + h // 4].reshape(h // 2, w // 2).astype(np.float64)
    v = yuv[h + h // 4:].reshape(h // 2, w // 2).astype(np.float64)
    u, v = (np.repeat(np.repeat(p, 2, 0), 2, 1) for p in (u, v))
    y, u, v = (y - 16) * 255 / 219, (u - 128) * 255 / 224, (v - 128) * 255 / 224
    r = y + 2 * (1 - kr) * v
    b = y + 2 * (1 - kb) * u
    g = (y - kr * r - kb * b) / (1 - kr - kb)
    return np.clip(np.stack([r, g, b], -1), 0, 255)


def diff(a, b):
    d = np.abs(np.stack(a).astype(np.float64) - np.stack(b).astype(np.float64))
    return d.reshape(-1, 3).max(0), d.reshape(-1, 3).mean(0)


def fmt(d):
    mx, mean = d
    return "max " + "/".join(f"{x:.0f}" for x in mx) + "  mean " + "/".join(f"{x:.3f}" for x in mean)


def compare(name, dump, work):
    path = os.path.join(work, name + ".mp4")
    make_clip(name, path)
    out = os.path.join(work, name)
    os.makedirs(out, exist_ok=True)
    subprocess.run([dump, path, out], check=True)
    meta = json.load(open(os.path.join(out, "frames.json")))
    (sw, sh), (rw, rh), idx = meta["source"], meta["resized"], meta["indices"]
    ours_src = list(np.fromfile(os.path.join(out, "source.rgb"), np.uint8).reshape(len(idx), sh, sw, 3))
    ours_res = list(np.fromfile(os.path.join(out, "resized.rgb"), np.uint8).reshape(len(idx), rh, rw, 3))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from make_resize_reference import resize_tv  # PyTorch's uint8 bicubic, to the bit
    tag = stream_colorspace(path)
    plain, tagged, yuv = pyav_frames(path, idx, tag)
    tv = torchvision_frames(path, idx)
    print(f"{name}: {sw}x{sh} tagged '{tag}', frames {idx} -> resized {rw}x{rh} (R/G/B levels)")
    rows = {}
    for ref_name, ref in (("pyav", plain), ("pyav_tag", tagged), ("torchvision", tv)):
        rows[ref_name] = (diff(ours_src, ref), diff(ours_res, [resize_tv(f, rh, rw) for f in ref]))
        print(f"  ours vs {ref_name:<11} before resize: {fmt(rows[ref_name][0])}")
        print(f"  {'':<19}after resize:  {fmt(rows[ref_name][1])}")
    for m in MATRICES:
        model = [float_model(f, m) for f in yuv]
        print(f"  float BT.{m} model: ours {fmt(diff(ours_src, model))}; pyav {fmt(diff(plain, model))}; "
              f"pyav_tag {fmt(diff(tagged, model))}")
    before, after = rows["pyav_tag"]
    return before[0].max() <= 1 and after[0].max() <= 1


FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "media")
LOADER_CLIPS = {"colour_bt709.mp4": ("709", False), "colour_bt709_full.mp4": ("709", True),
                "colour_untagged.mp4": ("601", False)}
REGIONS = [(10, (81, 121, 197)), (50, (90, 191, 96))]  # x at row 32, stored Y, Cb, Cr


def exact_rgb(ycbcr, matrix, full):
    kr, kb = MATRICES[matrix]
    y, cb, cr = ycbcr
    luma = y if full else (y - 16) * 255 / 219
    pb, pr = (cb - 128, cr - 128) if full else ((cb - 128) * 255 / 224, (cr - 128) * 255 / 224)
    r, b = luma + 2 * (1 - kr) * pr, luma + 2 * (1 - kb) * pb
    return np.clip([r, (luma - kr * r - kb * b) / (1 - kr - kb), b], 0, 255)


def first_frame_hwc(video):
    v = np.asarray(video.numpy() if hasattr(video, "numpy") else video)
    f = v[0]
    return f if f.shape[-1] == 3 else np.moveaxis(f, 0, -1)


def loaders():
    """Which conversion each available video loader applies to the colour_* fixtures."""
    decoders = []
    try:
        from transformers.video_utils import load_video
        decoders.append(("transformers default", lambda p: load_video(p)[0]))
        for backend in ("pyav", "torchvision", "torchcodec", "decord", "opencv"):
            decoders.append((f"transformers {backend}", lambda p, b=backend: load_video(p, backend=b)[0]))
    except ImportError as e:
        print(f"transformers: not importable ({e})")
    try:
        import torchvision
        decoders.append((f"torchvision {torchvision.__version__} read_video",
                         lambda p: torchvision.io.read_video(p, pts_unit="sec", output_format="THWC")[0]))
    except ImportError:
        print("torchvision: not installed")
    try:
        import av
        print(f"PyAV {av.__version__}")

        def pyav(p):
            with av.open(p) as c:
                return [next(c.decode(video=0)).to_ndarray(format="rgb24")]
        decoders.append(("PyAV to_ndarray(rgb24)", pyav))
    except ImportError:
        print("PyAV: not installed")
    candidates = [(m, full) for m in MATRICES for full in (False, True)]
    for clip, (tag_matrix, tag_full) in LOADER_CLIPS.items():
        print(f"{clip}: tagged BT.{tag_matrix} {'full' if tag_full else 'limited'} range"
              if clip != "colour_untagged.mp4" else f"{clip}: untagged")
        for name, decode in decoders:
            try:
                frame = first_frame_hwc(decode(os.path.join(FIXTURES, clip)))
            except Exception as e:  # a backend that is not installed, or refuses the file
                print(f"  {name:<26} unavailable: {type(e).__name__}: {str(e)[:80]}")
                continue
            got = [frame[32, x].astype(np.float64) for x, _ in REGIONS]
            err = {c: max(np.abs(g - exact_rgb(v, *c)).max() for g, (_, v) in zip(got, REGIONS)) for c in candidates}
            best = min(err, key=err.get)
            print(f"  {name:<26} pixels {[list(map(int, g)) for g in got]} -> BT.{best[0]} "
                  f"{'full' if best[1] else 'limited'} (max error {err[best]:.1f}; tag's: "
                  f"{err[(tag_matrix, tag_full)]:.1f})")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--loaders", action="store_true", help="which conversion transformers' video loaders apply")
    ap.add_argument("--dump", help="the oracle_dump_video_frames binary")
    ap.add_argument("--keep", help="work directory to keep (default: a temporary one)")
    ap.add_argument("--check", action="store_true", help="exit 1 unless ours is within 1 level of pyav_tag")
    args = ap.parse_args()
    if args.loaders:
        loaders()
        return
    if not args.dump:
        ap.error("--dump BINARY is needed (or --loaders)")
    import av
    print(f"PyAV {av.__version__}, FFmpeg via PyAV {av.library_versions.get('libswscale')}")
    work = args.keep or tempfile.mkdtemp(prefix="ninfer_video_frames_")
    os.makedirs(work, exist_ok=True)
    ok = all([compare(name, args.dump, work) for name in CLIPS])
    if args.check and not ok:
        print("FAIL: ours differs from the tag-honouring reference by more than 1 level")
        sys.exit(1)


if __name__ == "__main__":
    main()
