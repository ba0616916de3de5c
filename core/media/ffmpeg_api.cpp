// ninfer::core - FFmpeg loaded with dlopen: the function table, the version checks, the failure text.
#include "core/media/ffmpeg_api.h"

#include "core/util/error.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace ninfer::core {
namespace {

struct Library {
    const char* soname;
    const char* package; // Debian 12's package that ships it
    unsigned header_major;
};

// AV_STRINGIFY of the header's major gives the soname these headers were built for.
const Library kLibraries[] = {
    {"libavutil.so." AV_STRINGIFY(LIBAVUTIL_VERSION_MAJOR), "libavutil57", LIBAVUTIL_VERSION_MAJOR},
    {"libavcodec.so." AV_STRINGIFY(LIBAVCODEC_VERSION_MAJOR), "libavcodec59", LIBAVCODEC_VERSION_MAJOR},
    {"libavformat.so." AV_STRINGIFY(LIBAVFORMAT_VERSION_MAJOR), "libavformat59", LIBAVFORMAT_VERSION_MAJOR},
    {"libswscale.so." AV_STRINGIFY(LIBSWSCALE_VERSION_MAJOR), "libswscale6", LIBSWSCALE_VERSION_MAJOR},
};

struct Loaded {
    FfmpegApi api;
    std::string missing; // "" = loaded
};

std::string cannot(const Library& lib, const std::string& why) {
    return std::string("media: cannot load FFmpeg's ") + lib.soname + " (" + why + "); image and video input need " +
           "it: install the package " + lib.package + " or put the library on LD_LIBRARY_PATH";
}

Loaded load() {
    Loaded out;
    void* handles[4] = {};
    const char* dir = std::getenv("NINFER_FFMPEG_DIR");
    for (int i = 0; i < 4; ++i) {
        const std::string path = dir ? std::string(dir) + "/" + kLibraries[i].soname : kLibraries[i].soname;
        // RTLD_LOCAL: FFmpeg's symbols stay out of the global namespace; libavcodec finds
        // libavutil through its own DT_NEEDED, which resolves to the handle already loaded.
        handles[i] = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!handles[i]) {
            const char* e = dlerror();
            out.missing = cannot(kLibraries[i], e ? e : "not found");
            return out;
        }
    }
#define NINFER_FFMPEG_RESOLVE(lib, name)                                                            \
    out.api.name = reinterpret_cast<decltype(&::name)>(dlsym(handles[lib], #name));               \
    if (!out.api.name) {                                                                            \
        out.missing = cannot(kLibraries[lib], "it has no " #name);                                  \
        return out;                                                                                 \
    }
    NINFER_FFMPEG_FUNCTIONS(NINFER_FFMPEG_RESOLVE)
#undef NINFER_FFMPEG_RESOLVE
    const unsigned majors[4] = {out.api.avutil_version() >> 16, out.api.avcodec_version() >> 16,
                                out.api.avformat_version() >> 16, out.api.swscale_version() >> 16};
    for (int i = 0; i < 4; ++i)
        if (majors[i] != kLibraries[i].header_major) {
            out.missing = cannot(kLibraries[i], "it reports major version " + std::to_string(majors[i]) +
                                                    ", ninfer was built for " + std::to_string(kLibraries[i].header_major));
            return out;
        }
    out.api.av_log_set_level(AV_LOG_QUIET); // a hostile file must not fill the journal
    return out;
}

const Loaded& loaded() {
    static Loaded state;
    static std::once_flag once;
    std::call_once(once, [] { state = load(); });
    return state;
}

} // namespace

const FfmpegApi& ffmpeg_api() {
    const Loaded& l = loaded();
    if (!l.missing.empty()) throw Error(Errc::Unavailable, l.missing);
    return l.api;
}

std::string ffmpeg_missing() { return loaded().missing; }

} // namespace ninfer::core
