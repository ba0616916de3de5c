#!/bin/sh
# ninfer - pack Debian 12's FFmpeg decoding libraries and everything they load into one archive, for
# a machine without them (the GPU machine: Ubuntu 24.04, no network, no Debian packages).
# ninferd dlopens libavutil.so.57, libavcodec.so.59, libavformat.so.59 and libswscale.so.6
# (core/media/ffmpeg_api.h); with RTLD_NOW every library they name must load too, so the bundle is
# their whole ldd closure minus the C runtime the target has (glibc, libstdc++, libgcc_s).
# Usage: scripts/ffmpeg_bundle.sh OUT.tar.zst
# On the target: mkdir -p ffmpeg && tar -xf OUT.tar.zst -C ffmpeg && export LD_LIBRARY_PATH=$PWD/ffmpeg
# (docs/MEDIA.md).
set -eu
out=${1:?usage: ffmpeg_bundle.sh OUT.tar.zst}
dir=/usr/lib/x86_64-linux-gnu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for lib in libavutil.so.57 libavcodec.so.59 libavformat.so.59 libswscale.so.6; do
    [ -e "$dir/$lib" ] || { echo "ffmpeg_bundle: $dir/$lib is missing (apt-get install libavcodec59 libavformat59 libswscale6)" >&2; exit 1; }
    echo "$dir/$lib"
    ldd "$dir/$lib" | awk '/=> \// { print $3 }'
done | sort -u | grep -v -E '/(libc|libm|libpthread|libdl|librt|libgcc_s|libstdc\+\+|ld-linux-x86-64)\.so' |
while read -r path; do
    cp -L "$path" "$tmp/$(basename "$path")" # the soname the loader asks for, as a plain file
done
tar -C "$tmp" -cf - . | zstd -q -19 -T0 -o "$out" -f
echo "ffmpeg_bundle: $(ls "$tmp" | wc -l) libraries, $(du -sb "$tmp" | cut -f1) bytes -> $out ($(stat -c %s "$out") bytes)"
