#!/usr/bin/env bash
# ninfer - a small FFmpeg for the GPU machine's media runs (issue 31). The GPU machine has no
# FFmpeg and Debian's libavcodec59 pulls in ~170 MB of codec libraries, past what a device call
# carries. This builds the same upstream release as this machine's Debian package (so the sonames
# and ABI core/media/ffmpeg_api.cpp checks are the same: libavutil.so.57, libavcodec.so.59,
# libavformat.so.59, libswscale.so.6) from Debian's source tarball, with only the decoders,
# demuxers and parsers ninfer's media path names, linking only libz and libc (~6.5 MB, ~2.5 MB
# xz-packed). Not built: AV1 (Debian decodes it through libdav1d) and the hardware paths.
# On the GPU machine: NINFER_FFMPEG_DIR=<dir>/lib ninferd ... (core/media/ffmpeg_api.cpp).
#
# Usage: tests/gpu/build_min_ffmpeg.sh DIR    (needs nasm, curl, make, a C compiler; ~5 min on 2 cores)
# Result: DIR/lib/lib{avutil,avcodec,avformat,swscale}.so.* and DIR/ffmpeg-min.tar.xz of them.
set -euo pipefail
DIR=$(mkdir -p "$1" && cd "$1" && pwd)
VERSION=$(dpkg-query -W -f '${Version}' libavcodec59 | sed -E 's/^[0-9]+://; s/-.*$//')
TARBALL=ffmpeg_$VERSION.orig.tar.xz
[ -f "$DIR/$TARBALL" ] || curl -fsS -o "$DIR/$TARBALL" "http://deb.debian.org/debian/pool/main/f/ffmpeg/$TARBALL"
rm -rf "$DIR/src" && mkdir -p "$DIR/src" && tar -xJf "$DIR/$TARBALL" -C "$DIR/src" --strip-components 1
cd "$DIR/src"
./configure --prefix="$DIR" --enable-shared --disable-static --disable-programs --disable-doc \
    --disable-avdevice --disable-postproc --disable-avfilter --disable-swresample --disable-network \
    --disable-everything --disable-autodetect --enable-zlib --enable-pthreads --disable-debug \
    --enable-decoder=h264,hevc,vp8,vp9,mpeg4,mjpeg,png,gif,webp \
    --enable-demuxer=mov,matroska,image2,image_png_pipe,image_jpeg_pipe,image_webp_pipe,gif,avi,h264 \
    --enable-parser=h264,hevc,vp8,vp9,mpeg4video,mjpeg,png,gif,webp \
    --enable-bsf=vp9_superframe_split,h264_mp4toannexb --enable-protocol=file >"$DIR/configure.log"
make -j"$(nproc)" >"$DIR/make.log" 2>&1
make install >>"$DIR/make.log" 2>&1
(cd "$DIR/lib" && tar -cJf "$DIR/ffmpeg-min.tar.xz" libavutil.so.* libavcodec.so.* libavformat.so.* libswscale.so.*)
echo "build_min_ffmpeg: FFmpeg $VERSION in $DIR/lib ($(du -sh "$DIR/ffmpeg-min.tar.xz" | cut -f1) packed)"
