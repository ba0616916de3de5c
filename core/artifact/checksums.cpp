// ninfer::core - artifact payload checksums: the metadata member and its parallel verification.
#include "core/artifact/checksums.h"

#include "core/util/crc32c.h"
#include "core/util/error.h"
#include "core/util/json_writer.h"

#include <simdjson.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <thread>

namespace ninfer::core {
namespace {

constexpr uint64_t kChunkBytes = 64ull << 20; // unit of work; chunk CRCs are combined per object

std::string hex8(uint32_t v) {
    char buf[9];
    std::snprintf(buf, sizeof buf, "%08x", v);
    return buf;
}

struct Checked {
    std::string kind; // "tensor" or "resource"
    std::string id;
    const uint8_t* data;
    uint64_t bytes;
    uint32_t stored = 0;
    bool has_stored = false;
    std::vector<uint32_t> chunk_crcs;
};

// Reads metadata.payload_crc32c into the objects; false when the member is absent.
bool read_stored(const Artifact& a, std::vector<Checked>& objects) {
    const std::string fail_prefix = "artifact: " + a.path() + ": metadata." + kPayloadCrc32cMember + ": ";
    simdjson::dom::parser parser;
    simdjson::padded_string text(a.metadata_json());
    simdjson::dom::element root;
    if (parser.parse(text).get(root)) throw Error(fail_prefix + "metadata is not JSON");
    simdjson::dom::element member;
    if (root[kPayloadCrc32cMember].get(member)) return false;
    simdjson::dom::object crcs;
    if (member.get(crcs)) throw Error(fail_prefix + "not an object");
    std::map<std::string_view, Checked*> by_id;
    for (Checked& c : objects) by_id[c.id] = &c;
    for (auto [id, value] : crcs) {
        auto it = by_id.find(id);
        if (it == by_id.end()) throw Error(fail_prefix + "names object " + std::string(id) + ", which does not exist");
        std::string_view hex;
        if (value.get(hex) || hex.size() != 8 || hex.find_first_not_of("0123456789abcdef") != std::string_view::npos)
            throw Error(fail_prefix + "object " + std::string(id) + ": not 8 lowercase hex digits");
        it->second->stored = uint32_t(std::stoul(std::string(hex), nullptr, 16));
        it->second->has_stored = true;
    }
    for (const Checked& c : objects)
        if (!c.has_stored) throw Error(fail_prefix + "no checksum for " + c.kind + " " + c.id);
    return true;
}

std::string bound_as(const Artifact& a, std::string_view tensor_id) {
    std::string names;
    for (const auto& [name, binding] : a.bindings())
        for (const WeightPiece& p : binding.pieces)
            if (p.tensor && p.tensor->id == tensor_id && names.find(name) == std::string::npos)
                names += (names.empty() ? "" : ", ") + name;
    return names.empty() ? "" : " (bound as " + names + ")";
}

} // namespace

std::string metadata_with_payload_crc32c(std::string_view metadata_json,
                                         const std::vector<std::pair<std::string_view, uint32_t>>& crcs) {
    JsonWriter w;
    w.begin_object();
    for (const auto& [id, crc] : crcs) w.member(id, hex8(crc));
    w.end_object();
    std::string member = std::string("\"") + kPayloadCrc32cMember + "\":" + w.take();
    size_t open = metadata_json.find('{');
    if (open == std::string_view::npos) throw Error("artifact writer: metadata is not an object");
    size_t rest = metadata_json.find_first_not_of(" \t\r\n", open + 1);
    bool empty = rest != std::string_view::npos && metadata_json[rest] == '}';
    return std::string(metadata_json.substr(0, open + 1)) + member + (empty ? "" : ",") +
           std::string(metadata_json.substr(open + 1));
}

std::string metadata_without_payload_crc32c(std::string_view metadata_json) {
    simdjson::dom::parser parser;
    simdjson::padded_string text(metadata_json);
    simdjson::dom::object root;
    if (parser.parse(text).get(root)) return std::string(metadata_json);
    JsonWriter w;
    w.begin_object();
    for (auto [key, value] : root)
        if (key != kPayloadCrc32cMember) w.key(key).raw(simdjson::minify(value));
    w.end_object();
    return w.take();
}

PayloadCrcs::PayloadCrcs(std::vector<Object> objects) : objects_(std::move(objects)), crc_(objects_.size(), 0) {}

void PayloadCrcs::extend(uint64_t offset, const uint8_t* data, uint64_t n) {
    const uint64_t end = offset + n;
    while (next_ < objects_.size() && objects_[next_].offset < end) {
        const Object& o = objects_[next_];
        const uint64_t a = std::max(offset, o.offset), b = std::min(end, o.offset + o.bytes);
        if (a < b) crc_[next_] = data ? crc32c_extend(crc_[next_], data + (a - offset), b - a) : crc32c_extend_zeros(crc_[next_], b - a);
        if (b < o.offset + o.bytes) break; // the object goes on past this piece
        ++next_;
    }
}

void PayloadCrcs::feed(uint64_t offset, const uint8_t* data, uint64_t n) {
    if (offset < fed_to_) throw Error("artifact checksums: payload fed out of order");
    extend(fed_to_, nullptr, offset - fed_to_);
    extend(offset, data, n);
    fed_to_ = offset + n;
}

std::vector<std::pair<std::string_view, uint32_t>> PayloadCrcs::crcs(uint64_t total) {
    feed(total, nullptr, 0);
    std::vector<std::pair<std::string_view, uint32_t>> out;
    for (size_t i = 0; i < objects_.size(); ++i) out.emplace_back(objects_[i].id, crc_[i]);
    return out;
}

PayloadVerifyResult verify_payload_checksums(const Artifact& artifact, unsigned n_threads) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<Checked> objects;
    for (const StoredTensor& t : artifact.tensors()) objects.push_back({"tensor", t.id, t.data, t.bytes, 0, false, {}});
    for (const auto& [id, r] : artifact.resources()) objects.push_back({"resource", id, r.data, r.bytes, 0, false, {}});
    PayloadVerifyResult result;
    result.has_checksums = read_stored(artifact, objects);
    if (!result.has_checksums) return result;

    struct Work {
        Checked* object;
        size_t chunk;
    };
    std::vector<Work> work;
    for (Checked& c : objects) {
        c.chunk_crcs.assign(std::max<uint64_t>(1, (c.bytes + kChunkBytes - 1) / kChunkBytes), 0);
        for (size_t i = 0; i < c.chunk_crcs.size(); ++i) work.push_back({&c, i});
        result.n_bytes += c.bytes;
    }
    std::atomic<size_t> next{0};
    auto run = [&] {
        for (size_t i; (i = next.fetch_add(1)) < work.size();) {
            Checked& c = *work[i].object;
            uint64_t begin = work[i].chunk * kChunkBytes, n = std::min(kChunkBytes, c.bytes - std::min(c.bytes, begin));
            c.chunk_crcs[work[i].chunk] = crc32c_extend(0, c.data + begin, n);
        }
    };
    std::vector<std::thread> threads;
    for (unsigned t = 1; t < std::max(1u, n_threads); ++t) threads.emplace_back(run);
    run();
    for (std::thread& t : threads) t.join();

    const Checked* first_bad = nullptr;
    uint32_t first_computed = 0;
    uint64_t n_bad = 0;
    for (const Checked& c : objects) {
        uint32_t crc = 0;
        for (size_t i = 0; i < c.chunk_crcs.size(); ++i)
            crc = crc32c_combine(crc, c.chunk_crcs[i], std::min(kChunkBytes, c.bytes - i * kChunkBytes));
        if (crc == c.stored) continue;
        if (!n_bad++) first_bad = &c, first_computed = crc;
    }
    if (first_bad)
        throw Error("artifact: " + artifact.path() + ": payload checksum mismatch: " + first_bad->kind + " " +
                    first_bad->id + (first_bad->kind == "tensor" ? bound_as(artifact, first_bad->id) : "") +
                    ": stored crc32c " + hex8(first_bad->stored) + ", computed " + hex8(first_computed) +
                    (n_bad > 1 ? " (and " + std::to_string(n_bad - 1) + " more objects differ)" : "") +
                    "; the file is corrupt: copy or convert it again");
    result.n_objects = objects.size();
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return result;
}

} // namespace ninfer::core
