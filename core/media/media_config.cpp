// ninfer::core - preprocessor_config.json / video_preprocessor_config.json -> MediaPreprocess.
#include "core/media/media_config.h"

#include "core/util/error.h"

#include <simdjson.h>

#include <string>

namespace ninfer::core {
namespace {

using simdjson::dom::element;
using simdjson::dom::object;

[[noreturn]] void fail(std::string_view file, const std::string& why) {
    throw Error("media: " + std::string(file) + ": " + why);
}

bool number(object o, std::string_view key, double& out) {
    element e;
    if (o.at_key(key).get(e) || e.is_null()) return false;
    if (e.is_double()) out = double(e.get_double());
    else if (e.is_int64()) out = double(int64_t(e.get_int64()));
    else if (e.is_uint64()) out = double(uint64_t(e.get_uint64()));
    else return false;
    return true;
}

template <class T> void read_int(object o, std::string_view key, T& out, std::string_view file) {
    double v;
    if (!number(o, key, v)) return;
    if (!(v >= 1 && v <= 1e12) || v != double(int64_t(v))) fail(file, std::string(key) + " must be a positive integer");
    out = T(v);
}

void read_triple(object o, std::string_view key, std::array<float, 3>& out, std::string_view file) {
    element e;
    if (o.at_key(key).get(e) || e.is_null()) return;
    double v;
    if (e.is_number()) {
        v = e.is_double() ? double(e.get_double()) : double(int64_t(e.get_int64()));
        out = {float(v), float(v), float(v)};
        return;
    }
    simdjson::dom::array a;
    if (e.get_array().get(a) || a.size() != 3) fail(file, std::string(key) + " must be 3 numbers");
    size_t i = 0;
    for (element x : a) {
        if (!x.is_number()) fail(file, std::string(key) + " must be 3 numbers");
        out[i++] = float(x.is_double() ? double(x.get_double()) : double(int64_t(x.get_int64())));
    }
}

void read(std::string_view json, MediaPreprocess& p, std::string_view file, bool video) {
    if (json.empty()) return;
    simdjson::dom::parser parser;
    object o;
    if (parser.parse(json.data(), json.size()).get_object().get(o)) fail(file, "not a JSON object");
    read_int(o, "patch_size", p.patch_size, file);
    read_int(o, "temporal_patch_size", p.temporal_patch_size, file);
    read_int(o, "merge_size", p.merge_size, file);
    object size;
    if (!o.at_key("size").get_object().get(size)) {
        read_int(size, "shortest_edge", p.min_pixels, file);
        read_int(size, "longest_edge", p.max_pixels, file);
    }
    // transformers' Qwen2VLImageProcessorFast: min_pixels / max_pixels, when given, override size.
    read_int(o, "min_pixels", p.min_pixels, file);
    read_int(o, "max_pixels", p.max_pixels, file);
    double v;
    if (number(o, "rescale_factor", v)) {
        if (!(v > 0 && v <= 1)) fail(file, "rescale_factor must be in (0, 1]");
        p.rescale_factor = v;
    }
    read_triple(o, "image_mean", p.mean, file);
    read_triple(o, "image_std", p.std, file);
    for (float s : p.std)
        if (!(s > 0)) fail(file, "image_std must be positive");
    if (video) {
        if (number(o, "fps", v)) {
            if (!(v > 0 && v <= 240)) fail(file, "fps must be in (0, 240]");
            p.fps = v;
        }
        read_int(o, "min_frames", p.min_frames, file);
        read_int(o, "max_frames", p.max_frames, file);
        bool cap = false;
        if (!o.at_key("cap_pixels_per_frame").get_bool().get(cap)) p.cap_pixels_per_frame = cap;
        if (p.min_frames > p.max_frames) fail(file, "min_frames exceeds max_frames");
    }
    if (p.min_pixels > p.max_pixels) fail(file, "the pixel minimum exceeds the maximum");
    if (p.patch_size > 64 || p.merge_size > 8 || p.temporal_patch_size > 8)
        fail(file, "patch_size, merge_size or temporal_patch_size out of range");
}

} // namespace

MediaConfig media_config_from_json(std::string_view image_json, std::string_view video_json) {
    MediaConfig c;
    read(image_json, c.image, "preprocessor_config.json", false);
    read(video_json, c.video, "video_preprocessor_config.json", true);
    return c;
}

} // namespace ninfer::core
