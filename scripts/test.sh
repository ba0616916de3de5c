#!/bin/bash
# ninfer - build everything and run every test (the README's test command; .ci/run calls it).
# Stages: configure + build the CUDA-off tree, run all tests from it (ctest, both cores), the
# sanitizer and libFuzzer builds with short fuzz runs, build (with CUDA where nvcc is: the one
# CUDA compile), lint, install and purge the .deb, check the packaged CUDA-enabled binaries work
# without the NVIDIA driver, build and lint the .rpm.
# Each stage prints its wall time. Usage: scripts/test.sh [--no-cuda]
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=$(nproc)
BUILD=${NINFER_BUILD_DIR:-build-ci}
CUDA_BUILD=${NINFER_CUDA_BUILD_DIR:-build-ci-cuda}
export NODE_PATH=/opt/ninfer-npm/node_modules

t_total=$(date +%s)
stage() { # stage NAME COMMAND...: runs a command and prints its time
    local name=$1; shift
    local t0; t0=$(date +%s)
    echo "=== stage: $name"
    if "$@"; then
        echo "=== stage: $name: ok in $(( $(date +%s) - t0 )) s"
    else
        local rc=$?
        echo "=== stage: $name: FAILED (exit $rc) after $(( $(date +%s) - t0 )) s"
        exit $rc
    fi
}

stage configure cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNINFER_CUDA=OFF
stage build cmake --build "$BUILD" -j "$JOBS"
stage unit-and-blackbox-tests ctest --test-dir "$BUILD" -j "$JOBS" --output-on-failure --timeout 1200
# The control-protocol decoders' seeded fuzz test again under AddressSanitizer + UBSan, so an
# over-read fails the run instead of passing by luck (only the proto targets: about a minute).
SAN_BUILD=${NINFER_SAN_BUILD_DIR:-build-ci-asan}
stage sanitizer-configure cmake -S . -B "$SAN_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DNINFER_SANITIZE=ON
stage sanitizer-build cmake --build "$SAN_BUILD" -j "$JOBS" --target test_proto
stage sanitizer-proto-fuzz ctest --test-dir "$SAN_BUILD" -j "$JOBS" --output-on-failure -R '^proto\.'
# libFuzzer targets (tests/fuzz/: HTTP, API bodies, control frames, artifact, slot files, tokenizer,
# chat template, config) built with clang-16 under ASan + UBSan, each run 10 s over its seed corpus.
# This second whole-tree build goes through ccache where installed: unchanged files cost nothing.
FUZZ_BUILD=${NINFER_FUZZ_BUILD_DIR:-build-ci-fuzz}
fuzz_launcher=()
command -v ccache > /dev/null && fuzz_launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
stage fuzz-configure env CC=clang-16 CXX=clang++-16 cmake -S . -B "$FUZZ_BUILD" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNINFER_FUZZ=ON -DNINFER_TESTS=OFF "${fuzz_launcher[@]}"
stage fuzz-build cmake --build "$FUZZ_BUILD" -j "$JOBS" --target fuzz_all
stage fuzz-short tests/fuzz/run.sh 10 "$FUZZ_BUILD"
# Packages: each builds a copy of the tree without tests (DEB_BUILD_OPTIONS=nocheck), then the .deb
# is installed, run and purged on this machine (root), the .rpm built and linted (see the scripts).
# Where nvcc is, the .deb is the CUDA flavour (the package's default): its build is the run's one
# CUDA compile, and the packaged binaries are checked to work without the NVIDIA driver. The .rpm
# is the CPU flavour. Without root, the CUDA targets are compiled in a build tree instead.
cuda=0
[ "${1:-}" != "--no-cuda" ] && [ -x /usr/local/cuda/bin/nvcc ] && cuda=1
if [ "$(id -u)" = 0 ]; then
    deb_work=$(mktemp -d)
    deb_profiles=pkg.ninfer.nocuda
    [ $cuda = 1 ] && deb_profiles=
    stage package-deb env NINFER_DEB_JOBS="$JOBS" NINFER_DEB_PROFILES="$deb_profiles" NINFER_DEB_WORKDIR="$deb_work" \
        tests/blackbox/test_package_deb.sh
    if [ $cuda = 1 ]; then
        stage cuda-binaries-without-driver tests/cuda_without_driver.sh --deb "$(ls "$deb_work"/ninfer_*_amd64.deb)"
    fi
    rm -rf "$deb_work"
    stage package-rpm tests/blackbox/test_package_rpm.sh
else
    echo "=== stage: package-deb, package-rpm: skipped (they install packages: run as root)"
    if [ $cuda = 1 ]; then
        stage cuda-configure cmake -S . -B "$CUDA_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
            -DNINFER_CUDA=ON -DNINFER_CUDA_ARCH=90a -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DNINFER_TESTS=OFF
        stage cuda-build cmake --build "$CUDA_BUILD" -j "$JOBS"
        stage cuda-binaries-without-driver tests/cuda_without_driver.sh "$CUDA_BUILD"
    fi
fi
echo "=== all stages passed in $(( $(date +%s) - t_total )) s"
