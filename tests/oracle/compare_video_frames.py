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
import argparse
import json
import os
import subprocess
import sys
import tempfile

import av
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_resize_reference import resize_tv  # noqa: E402  (PyTorch's uint8 bicubic, to the bit)

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


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dump", required=True, help="the oracle_dump_video_frames binary")
    ap.add_argument("--keep", help="work directory to keep (default: a temporary one)")
    ap.add_argument("--check", action="store_true", help="exit 1 unless ours is within 1 level of pyav_tag")
    args = ap.parse_args()
    print(f"PyAV {av.__version__}, FFmpeg via PyAV {av.library_versions.get('libswscale')}")
    work = args.keep or tempfile.mkdtemp(prefix="ninfer_video_frames_")
    os.makedirs(work, exist_ok=True)
    ok = all([compare(name, args.dump, work) for name in CLIPS])
    if args.check and not ok:
        print("FAIL: ours differs from the tag-honouring reference by more than 1 level")
        sys.exit(1)


if __name__ == "__main__":
    main()
