#!/bin/bash
# ninfer - the CUDA-enabled binaries must start and work on a machine without the NVIDIA driver:
# static CUDA runtime, no libcuda.so link, CPU fallback, and a clear message for --device cuda.
# Usage: tests/cuda_without_driver.sh BUILD_DIR          (ctl/ninferctl, daemon/ninferd of a build)
#        tests/cuda_without_driver.sh --deb NINFER.deb   (the packaged binaries, unpacked with dpkg -x;
#                                                         they must have the CUDA backend built in)
set -euo pipefail
fail() { echo "cuda_without_driver: $*" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
packaged=0
if [ "${1:-}" = --deb ]; then
    [ -f "${2:-}" ] || fail "no such package: ${2:-}"
    dpkg -x "$2" "$tmp/root"
    CTL=$tmp/root/usr/bin/ninferctl
    DAEMON=$tmp/root/usr/sbin/ninferd
    packaged=1
else
    CTL=$1/ctl/ninferctl
    DAEMON=$1/daemon/ninferd
fi
for bin in "$CTL" "$DAEMON"; do
    if [ $packaged = 0 ]; then [ -x "$bin" ] || continue; fi
    [ -x "$bin" ] || fail "missing $bin"
    if ldd "$bin" | grep -E 'libcuda\.so|libcudart\.so'; then fail "$bin links the CUDA driver or a shared cudart"; fi
    "$bin" --version >/dev/null || fail "$bin --version failed"
done
"$CTL" convert --synthetic tiny "$tmp/tiny.ninfer" --seed 1 2>/dev/null
out=$("$CTL" run "$tmp/tiny.ninfer" --prompt-ids 1,2,3 --max-new 4 --greedy --device cpu --print-token-ids 2>/dev/null)
[ -n "$out" ] || fail "run --device cpu printed nothing"
if msg=$("$CTL" run "$tmp/tiny.ninfer" --prompt-ids 1,2,3 --max-new 4 --device cuda 2>&1); then
    fail "--device cuda succeeded without a GPU"
fi
echo "$msg" | grep -qi 'cuda' || fail "unclear message for --device cuda: $msg"
if [ $packaged = 1 ]; then
    # A package built without CUDA says so instead of naming why the GPU is unavailable.
    if echo "$msg" | grep -qiE 'built without|no CUDA backend'; then fail "the package has no CUDA backend: $msg"; fi
    # The packaged ninferd loads and checks an artifact here (test_package_deb.sh serves with it).
    : > "$tmp/empty.conf"
    if ! "$DAEMON" --config "$tmp/empty.conf" --artifact "$tmp/tiny.ninfer" --device auto --check-config \
            > "$tmp/check.txt" 2>&1; then
        cat "$tmp/check.txt"; fail "ninferd --check-config failed"
    fi
fi
echo "cuda_without_driver: ok ($out; --device cuda: $msg)"
