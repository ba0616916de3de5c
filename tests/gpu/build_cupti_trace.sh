#!/usr/bin/env bash
# Builds tests/gpu/cupti/cupti_trace.cpp into $1/libninfer_cupti_trace.so and copies libcupti.so.13 beside
# it (the GPU machine's toolkit may not ship CUPTI where the loader finds it).
# Usage: bash tests/gpu/build_cupti_trace.sh OUT_DIR [CUDA_ROOT=/usr/local/cuda]
set -euo pipefail
OUTDIR=$1 CUDA=${2:-/usr/local/cuda}
LIB=$(ls -d "$CUDA"/extras/CUPTI/lib64 "$CUDA"/lib64 "$CUDA"/lib 2>/dev/null | while read d; do [ -e "$d/libcupti.so" ] && echo "$d"; done | head -1 || true)
INC=$(ls -d "$CUDA"/extras/CUPTI/include "$CUDA"/include 2>/dev/null | while read d; do [ -e "$d/cupti.h" ] && echo "$d"; done | head -1 || true)
mkdir -p "$OUTDIR"
g++ -std=c++20 -O2 -shared -fPIC -I"$INC" -I"$CUDA/include" "$(dirname "$0")/cupti/cupti_trace.cpp" -L"$LIB" -lcupti \
    -Wl,-rpath,'$ORIGIN' -o "$OUTDIR/libninfer_cupti_trace.so"
cp -L "$LIB/libcupti.so.13" "$OUTDIR/"
