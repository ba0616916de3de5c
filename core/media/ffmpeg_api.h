// ninfer::core - FFmpeg's decoding entry points, loaded at run time (dlopen by soname).
//
// Contract:
// - ffmpeg_api() loads libavutil, libavcodec, libavformat and libswscale by the sonames of the
//   FFmpeg these headers come from (Debian 12: libavutil.so.57, libavcodec.so.59,
//   libavformat.so.59, libswscale.so.6) on first use, resolves every function below, checks each
//   library's major version against the headers', and returns the table. The binaries never link
//   FFmpeg: ninferd starts and serves text without it; only a media request needs it.
// - A library that cannot be loaded (or lacks a symbol, or has another major version) makes
//   ffmpeg_api() throw Error(Errc::Unavailable, "media: ...") naming the soname and the Debian
//   package that ships it; the failure is remembered (later calls throw the same message without
//   retrying). ffmpeg_missing() returns that message, or "" when the libraries load.
// - The dynamic loader's search path applies (LD_LIBRARY_PATH), which is how a machine without
//   the packages gets them (docs/MEDIA.md). NINFER_FFMPEG_DIR=DIR loads the four from DIR only
//   (their own dependencies still come from the search path); the tests point it at an empty
//   directory to run the daemon as if FFmpeg were not installed.
// Thread safety: loading happens once (std::call_once); the table is immutable after it.
#pragma once

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/avutil.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>
}

#include <string>

namespace ninfer::core {

// Every function the media code calls, by library: X(library index, name). The pointer types
// come from the headers (decltype), so a signature can never disagree with them.
#define NINFER_FFMPEG_FUNCTIONS(X)                                                                  \
    X(0, avutil_version) X(0, av_frame_alloc) X(0, av_frame_free) X(0, av_frame_clone) X(0, av_malloc) X(0, av_free)     \
    X(0, av_log_set_level) X(0, av_strerror) X(0, av_dict_set) X(0, av_dict_free) X(0, av_pix_fmt_desc_get) \
    X(1, avcodec_version) X(1, avcodec_find_decoder) X(1, avcodec_alloc_context3)                   \
    X(1, avcodec_free_context) X(1, avcodec_parameters_to_context) X(1, avcodec_open2)              \
    X(1, avcodec_send_packet) X(1, avcodec_receive_frame) X(1, av_packet_alloc) X(1, av_packet_free) \
    X(1, av_packet_unref)                                                                           \
    X(2, avformat_version) X(2, avformat_alloc_context) X(2, avformat_open_input)                   \
    X(2, avformat_find_stream_info) X(2, avformat_close_input) X(2, av_find_best_stream)            \
    X(2, av_read_frame) X(2, avio_alloc_context) X(2, avio_context_free)                            \
    X(3, swscale_version) X(3, sws_getContext) X(3, sws_scale) X(3, sws_freeContext)                \
    X(3, sws_getCoefficients) X(3, sws_getColorspaceDetails) X(3, sws_setColorspaceDetails)

struct FfmpegApi {
#define NINFER_FFMPEG_MEMBER(lib, name) decltype(&::name) name = nullptr;
    NINFER_FFMPEG_FUNCTIONS(NINFER_FFMPEG_MEMBER)
#undef NINFER_FFMPEG_MEMBER
};

const FfmpegApi& ffmpeg_api();
std::string ffmpeg_missing();

} // namespace ninfer::core
