// ninfer tests - full-inventory v1/v2 `.ninfer` files built sparse (docs/ARTIFACT_FORMAT.md §1.1
// layout, the published inventories of upgrade_inventory.h), shared by the artifact upgrade tests
// and the daemon's artifact-upgrade op test. Header-only test helper (Catch2 REQUIREs on I/O
// failures).
#pragma once

#include "core/artifact/upgrade_inventory.h"
#include "core/formats/format.h"
#include "core/util/json_writer.h"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <map>
#include <string>
#include <unistd.h>

namespace ninfer::test {

using namespace core; // LegacyObject, TensorFormat, legacy_inventory, encoded_size, JsonWriter

inline uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

inline const char* legacy_format(TensorFormat f) {
    switch (f) {
    case TensorFormat::Bf16: return "BF16";
    case TensorFormat::Fp32: return "FP32";
    case TensorFormat::Int32: return "I32";
    case TensorFormat::Q4G64Fp16: return "Q4G64_F16S";
    case TensorFormat::Q5G64Fp16: return "Q5G64_F16S";
    case TensorFormat::Q6G64Fp16: return "Q6G64_F16S";
    default: return "W8G32_F16S";
    }
}

// Resource sizes: unconfirmed individually; their sum (12,833,281) aligns to the 12,833,536 that
// reproduces the published whole-file sizes (docs/ARTIFACT_FORMAT.md §3.6).
inline const uint64_t kResourceBytes[6] = {12'800'000, 20'000, 10'000, 200, 1'500, 1'581};

struct Built {
    uint64_t payload_start = 0, file_bytes = 0;
    std::map<std::string, uint64_t> offsets;
};

inline void write_at(const std::string& path, uint64_t offset, const std::string& bytes) {
    int fd = ::open(path.c_str(), O_WRONLY);
    REQUIRE(::pwrite(fd, bytes.data(), bytes.size(), off_t(offset)) == ssize_t(bytes.size()));
    ::close(fd);
}

// A v1 (or v2) file as the upstream writer lays it out (docs/ARTIFACT_FORMAT.md §1.1): compact
// JSON, offsets in array order, zero pad to P, payload; sparse beyond the directory and the
// markers.
inline Built build_legacy(const std::string& path, const std::string& model_id, int version,
                          std::vector<LegacyObject> objects = {}) {
    if (objects.empty()) objects = legacy_inventory(model_id);
    Built b;
    JsonWriter w;
    w.begin_object();
    if (version == 1) w.member("model_id", model_id);
    else w.key("identity").begin_object().member("model_id", model_id).member("weights_id", "groupwise-int").end_object();
    w.key("objects").begin_array();
    uint64_t cursor = 0;
    size_t resource = 0;
    for (const LegacyObject& o : objects) {
        uint64_t bytes = o.is_tensor ? encoded_size(o.format, o.shape) : kResourceBytes[resource++ % 6];
        uint64_t offset = align_up(cursor, o.is_tensor ? 256 : 1);
        w.begin_object().member("name", o.name).member("kind", o.is_tensor ? "tensor" : "resource");
        if (o.is_tensor) {
            w.key("shape").begin_array();
            for (uint64_t d : o.shape) w.value(d);
            std::string layout(layout_name(o.format));
            for (char& c : layout) c = c == '_' ? '-' : c;
            w.end_array().member("format", legacy_format(o.format)).member("layout", layout);
        } else {
            w.member("encoding", "raw-bytes-v1");
        }
        w.member("offset", offset).member("bytes", bytes).end_object();
        b.offsets[o.name] = offset;
        cursor = offset + bytes;
    }
    std::string json = w.end_array().end_object().take();
    b.payload_start = align_up(16 + json.size(), 4096);
    b.file_bytes = b.payload_start + cursor;
    std::string head = std::string("NINFER\0", 7) + char(version);
    uint64_t j = json.size();
    head.append(reinterpret_cast<const char*>(&j), 8);
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, off_t(b.file_bytes)) == 0);
    ::close(fd);
    write_at(path, 0, head + json);
    return b;
}

} // namespace ninfer::test
