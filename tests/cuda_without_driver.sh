#!/bin/bash
# ninfer - the CUDA-enabled binaries must start and work on a machine without the NVIDIA driver:
# static CUDA runtime, no libcuda.so link, CPU fallback, and a clear message for --device cuda.
set -euo pipefail
BUILD=$1
CTL=$BUILD/ctl/ninferctl
fail() { echo "cuda_without_driver: $*" >&2; exit 1; }
for bin in "$CTL" "$BUILD/daemon/ninferd"; do
    [ -x "$bin" ] || continue
    if ldd "$bin" | grep -E 'libcuda\.so|libcudart\.so'; then fail "$bin links the CUDA driver or a shared cudart"; fi
    "$bin" --version >/dev/null || fail "$bin --version failed"
done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$CTL" convert --synthetic tiny "$tmp/tiny.ninfer" --seed 1 2>/dev/null
out=$("$CTL" run "$tmp/tiny.ninfer" --prompt-ids 1,2,3 --max-new 4 --greedy --device cpu --print-token-ids 2>/dev/null)
[ -n "$out" ] || fail "run --device cpu printed nothing"
if msg=$("$CTL" run "$tmp/tiny.ninfer" --prompt-ids 1,2,3 --max-new 4 --device cuda 2>&1); then
    fail "--device cuda succeeded without a GPU"
fi
echo "$msg" | grep -qi 'cuda' || fail "unclear message for --device cuda: $msg"
echo "cuda_without_driver: ok ($out)"
