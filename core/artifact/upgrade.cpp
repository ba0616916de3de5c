// ninfer::core - v1/v2 -> V3 artifact upgrade: validate against the published inventory, write the
// V3 directory, copy the payload extent by extent, publish crash-safe.
#include "core/artifact/upgrade.h"

#include "core/artifact/checksums.h"
#include "core/artifact/json_strict.h"
#include "core/artifact/upgrade_inventory.h"
#include "core/formats/format.h"
#include "core/util/error.h"
#include "core/util/file_io.h"
#include "core/util/json_writer.h"
#include "core/util/regular_file.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <random>
#include <sys/stat.h>
#include <unistd.h>

namespace ninfer::core {
namespace {

constexpr char kMagicV1[8] = {'N', 'I', 'N', 'F', 'E', 'R', 0, 1};
constexpr char kMagicV2[8] = {'N', 'I', 'N', 'F', 'E', 'R', 0, 2};
constexpr char kMagicV3[8] = {'N', 'I', 'N', 'F', 'E', 'R', 0, 3};
constexpr char kMagicPart[8] = {'N', 'I', 'N', 'P', 'R', 'T', 0, 3};

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

struct SourceObject {
    LegacyObject legacy;
    uint64_t offset = 0, bytes = 0;
};

struct Source {
    int version = 0;
    std::string model_id, weights_id;
    uint64_t payload_start = 0, file_bytes = 0;
    std::vector<SourceObject> objects;
};

std::string legacy_layout_of(TensorFormat f) {
    std::string s(layout_name(f));
    for (char& c : s)
        if (c == '_') c = '-';
    return s;
}

uint64_t get_u64(simdjson::dom::element e, const std::string& what) {
    if (!e.is_uint64() && !e.is_int64()) throw Error(what + " must be a nonnegative integer");
    int64_t v;
    if (e.is_int64() && (v = int64_t(e.get_int64())) < 0) throw Error(what + " must be a nonnegative integer");
    return e.is_uint64() ? uint64_t(e.get_uint64()) : uint64_t(v);
}

std::string get_str(simdjson::dom::element e, const std::string& what) {
    if (!e.is_string() || std::string_view(e.get_string()).empty()) throw Error(what + " must be a nonempty string");
    return std::string(std::string_view(e.get_string()));
}

void require_members(simdjson::dom::object o, std::initializer_list<const char*> names, const std::string& what) {
    size_t n = 0;
    for (auto field : o) {
        ++n;
        bool known = false;
        for (const char* k : names) known = known || field.key == k;
        if (!known) throw Error(what + " has unknown member \"" + std::string(field.key) + "\"");
    }
    if (n != names.size()) throw Error(what + " has missing members");
}

Source read_source(int fd, const std::string& path) {
    Source s;
    struct stat st;
    if (::fstat(fd, &st) != 0) throw Error(std::strerror(errno));
    s.file_bytes = uint64_t(st.st_size);
    uint8_t head[16];
    if (s.file_bytes < 16 || ::pread(fd, head, 16, 0) != 16) throw Error("truncated: shorter than the 16-byte prefix");
    if (!std::memcmp(head, kMagicV3, 8)) throw Error("already a V3 artifact");
    s.version = !std::memcmp(head, kMagicV1, 8) ? 1 : !std::memcmp(head, kMagicV2, 8) ? 2 : 0;
    if (!s.version) throw Error("not a .ninfer v1 or v2 file (bad magic)");
    uint64_t json_bytes;
    std::memcpy(&json_bytes, head + 8, 8);
    if (json_bytes == 0 || json_bytes > s.file_bytes - 16 || json_bytes > (256u << 20))
        throw Error("invalid directory length " + std::to_string(json_bytes));
    s.payload_start = align_up(16 + json_bytes, 4096);
    if (s.payload_start > s.file_bytes) throw Error("declared JSON or payload start extends beyond the file");
    std::string json(json_bytes, '\0');
    if (::pread(fd, json.data(), json_bytes, 16) != ssize_t(json_bytes)) throw Error("cannot read the directory");

    simdjson::dom::parser parser;
    simdjson::dom::element root = detail::parse_json_strict(parser, json, "");
    if (!root.is_object()) throw Error("directory root must be an object");
    simdjson::dom::object ro = root.get_object();
    if (s.version == 1) {
        require_members(ro, {"model_id", "objects"}, "root");
        s.model_id = get_str(ro["model_id"].value(), "model_id");
        s.weights_id = "groupwise-int";
    } else {
        require_members(ro, {"identity", "objects"}, "root");
        if (!ro["identity"].value().is_object()) throw Error("identity must be an object");
        simdjson::dom::object id = ro["identity"].value().get_object();
        require_members(id, {"model_id", "weights_id"}, "identity");
        s.model_id = get_str(id["model_id"].value(), "identity.model_id");
        s.weights_id = get_str(id["weights_id"].value(), "identity.weights_id");
        if (s.weights_id != "groupwise-int")
            throw Error("weights_id '" + s.weights_id + "' is not supported (only groupwise-int inventories are published)");
    }
    if (!ro["objects"].value().is_array()) throw Error("objects must be an array");
    uint64_t payload = s.file_bytes - s.payload_start, cursor = 0;
    for (simdjson::dom::element e : ro["objects"].value().get_array()) {
        if (!e.is_object()) throw Error("object must be a JSON object");
        simdjson::dom::object o = e.get_object();
        SourceObject so;
        so.legacy.name = get_str(o["name"].value(), "object name");
        std::string what = "object " + so.legacy.name;
        std::string kind = get_str(o["kind"].value(), what + " kind");
        so.legacy.is_tensor = kind == "tensor";
        if (kind != "tensor" && kind != "resource") throw Error(what + ": kind must be tensor or resource");
        if (so.legacy.is_tensor) {
            require_members(o, {"name", "kind", "shape", "format", "layout", "offset", "bytes"}, what);
            std::string fname = get_str(o["format"].value(), what + " format");
            std::optional<TensorFormat> f = format_from_legacy_name(fname);
            if (!f) throw Error(what + ": unknown tensor format " + fname);
            so.legacy.format = *f;
            if (get_str(o["layout"].value(), what + " layout") != legacy_layout_of(*f))
                throw Error(what + ": layout does not accept format " + fname);
            if (!o["shape"].value().is_array()) throw Error(what + ": shape must be an array");
            for (simdjson::dom::element d : o["shape"].value().get_array()) so.legacy.shape.push_back(get_u64(d, what + " shape"));
        } else {
            require_members(o, {"name", "kind", "encoding", "offset", "bytes"}, what);
            if (get_str(o["encoding"].value(), what + " encoding") != "raw-bytes-v1") throw Error(what + ": unknown resource encoding");
        }
        so.offset = get_u64(o["offset"].value(), what + " offset");
        so.bytes = get_u64(o["bytes"].value(), what + " bytes");
        if (so.bytes == 0) throw Error(what + ": bytes must be positive");
        if (so.offset < cursor) throw Error(what + " overlaps or is out of order");
        if (so.legacy.is_tensor && so.offset % 256) throw Error(what + ": offset is not 256-aligned");
        if (so.offset > payload || so.bytes > payload - so.offset) throw Error(what + " extends beyond the file");
        if (so.legacy.is_tensor && so.bytes != encoded_size(so.legacy.format, so.legacy.shape))
            throw Error(what + " stores " + std::to_string(so.bytes) + " bytes; layout requires " +
                        std::to_string(encoded_size(so.legacy.format, so.legacy.shape)));
        cursor = so.offset + so.bytes;
        s.objects.push_back(std::move(so));
    }
    // The object list must be the published inventory of the model, in order.
    std::vector<LegacyObject> want = legacy_inventory(s.model_id);
    if (want.size() != s.objects.size())
        throw Error(std::to_string(s.objects.size()) + " objects; the published " + s.model_id + " inventory has " +
                    std::to_string(want.size()));
    for (size_t i = 0; i < want.size(); ++i) {
        const LegacyObject& g = s.objects[i].legacy;
        if (g.name != want[i].name || g.is_tensor != want[i].is_tensor ||
            (g.is_tensor && (g.shape != want[i].shape || g.format != want[i].format)))
            throw Error("object " + std::to_string(i) + " (" + g.name + ") differs from the published inventory (" +
                        want[i].name + ")");
    }
    return s;
}

void write_config_common(JsonWriter& w, bool moe, uint64_t h) {
    w.key("architectures").begin_array().value(moe ? "Qwen3_5MoeForCausalLM" : "Qwen3_5ForCausalLM").end_array();
    w.member("model_type", moe ? "qwen3_5_moe_text" : "qwen3_5_text").member("hidden_size", h);
    w.member("vocab_size", uint64_t(248320)).member("tie_word_embeddings", false);
    uint64_t layers = moe ? 40 : 64;
    w.member("num_hidden_layers", layers).key("layer_types").begin_array();
    for (uint64_t i = 0; i < layers; ++i) w.value(i % 4 == 3 ? "full_attention" : "linear_attention");
    w.end_array().member("max_position_embeddings", uint64_t(262144)).member("rms_norm_eps", double(1e-6f));
    w.member("num_attention_heads", uint64_t(moe ? 16 : 24)).member("num_key_value_heads", uint64_t(moe ? 2 : 4));
    w.member("head_dim", uint64_t(256)).key("rope_parameters").begin_object().member("rope_theta", 10000000.0);
    w.member("partial_rotary_factor", 0.25).key("mrope_section").begin_array().value(11).value(11).value(10).end_array();
    w.end_object().member("linear_num_key_heads", uint64_t(16)).member("linear_key_head_dim", uint64_t(128));
    w.member("linear_num_value_heads", uint64_t(moe ? 32 : 48)).member("linear_value_head_dim", uint64_t(128));
    w.member("linear_conv_kernel_dim", uint64_t(4));
    if (moe) {
        w.member("num_experts", uint64_t(256)).member("num_experts_per_tok", uint64_t(8));
        w.member("moe_intermediate_size", uint64_t(512)).member("shared_expert_intermediate_size", uint64_t(512));
    } else {
        w.member("intermediate_size", uint64_t(17408));
    }
}

void write_components(JsonWriter& w, bool moe, uint64_t h) {
    w.key("components").begin_object();
    w.key("text").begin_object().key("config").begin_object();
    write_config_common(w, moe, h);
    w.end_object().key("resources").begin_object();
    for (const char* r : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"})
        w.member(r, std::string("frontend/") + r);
    w.end_object().key("proposal").begin_object().member("domain", "indexed").member("rows", uint64_t(131072));
    w.end_object().end_object();
    w.key("vision").begin_object().key("config").begin_object();
    w.member("model_type", moe ? "qwen3_5_moe_vision" : "qwen3_5_vision").member("depth", 27).member("hidden_size", 1152);
    w.member("intermediate_size", 4304).member("num_heads", 16).member("patch_size", 16).member("temporal_patch_size", 2);
    w.member("spatial_merge_size", 2).member("num_position_embeddings", 2304).end_object().member("target", "text");
    w.key("resources").begin_object();
    for (const char* r : {"preprocessor_config.json", "video_preprocessor_config.json"}) w.member(r, std::string("frontend/") + r);
    w.end_object().end_object();
    w.key("mtp").begin_object().key("config").begin_object().key("architectures").begin_array();
    w.value(moe ? "Qwen3_5MoeMTP" : "Qwen3_5MTP").end_array().end_object().member("target", "text").end_object();
    if (moe) {
        w.key("dflash").begin_object().key("config").begin_object();
        w.key("architectures").begin_array().value("DFlashDraftModel").end_array().member("model_type", "qwen3");
        w.member("intermediate_size", 6144).member("num_attention_heads", 32).member("num_key_value_heads", 8);
        w.member("head_dim", 128).member("num_hidden_layers", 6).member("rms_norm_eps", double(1e-6f));
        w.key("rope_parameters").begin_object().member("rope_theta", 10000000.0).end_object();
        w.member("max_position_embeddings", uint64_t(262144)).key("layer_types").begin_array();
        for (int i = 0; i < 6; ++i) w.value(i < 5 ? "sliding_attention" : "full_attention");
        w.end_array().member("sliding_window", 4096).key("dflash_config").begin_object().key("target_layer_ids").begin_array();
        for (int id : {1, 6, 11, 16, 22, 27, 32, 37}) w.value(id);
        w.end_array().member("mask_token_id", 248077).end_object().end_object().member("target", "text").end_object();
    }
    w.end_object();
}

struct FilePlan {
    std::vector<uint64_t> segment_bytes; // files[i].payload_bytes
};

FilePlan plan_files(uint64_t entry_start, uint64_t total, uint64_t limit) {
    FilePlan p;
    if (entry_start + total <= limit) {
        p.segment_bytes = {total};
        return p;
    }
    uint64_t b0 = (limit - entry_start) / 4096 * 4096, c = (limit - 4096) / 4096 * 4096;
    if (b0 == 0 || c == 0) throw Error("the file size limit is too small for the directory");
    p.segment_bytes.push_back(b0);
    for (uint64_t at = b0; at < total; at += c) p.segment_bytes.push_back(std::min(c, total - at));
    return p;
}

std::string base_name(const std::string& path) {
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string part_name(const std::string& entry, size_t i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, ".part-%04zu", i);
    return entry + buf;
}

using ObjectCrcs = std::vector<std::pair<std::string_view, uint32_t>>;

std::string build_directory(const Source& s, const std::vector<PlannedBinding>& bindings,
                            const std::vector<PlannedUse>& uses, const FilePlan& files, const std::string& entry_name,
                            const ObjectCrcs& crcs) {
    bool moe = s.model_id == "qwen3.6-35b-a3b";
    JsonWriter w;
    w.begin_object();
    write_components(w, moe, moe ? 2048 : 5120);
    w.key("objects").begin_array();
    for (const SourceObject& o : s.objects) {
        w.begin_object().member("id", o.legacy.name).member("kind", o.legacy.is_tensor ? "tensor" : "resource");
        w.member("offset", o.offset).member("bytes", o.bytes);
        if (o.legacy.is_tensor) {
            w.key("shape").begin_array();
            for (uint64_t d : o.legacy.shape) w.value(d);
            w.end_array().member("format", format_name(o.legacy.format)).member("layout", layout_name(o.legacy.format));
        } else {
            w.member("encoding", "raw_bytes_v1");
        }
        w.end_object();
    }
    w.end_array().key("bindings").begin_object();
    for (const PlannedBinding& b : bindings) {
        w.key(b.parameter).begin_object();
        if (b.whole) {
            w.member("object", b.parts[0].object);
        } else {
            w.key("parts").begin_array();
            for (const PlannedPart& p : b.parts)
                w.begin_object().member("object", p.object).key("range").begin_array().value(p.begin).value(p.end).end_array().end_object();
            w.end_array();
        }
        w.end_object();
    }
    w.end_object().key("uses").begin_array();
    for (const PlannedUse& u : uses)
        w.begin_object().member("parameter", u.parameter).member("input", u.input).member("activation_policy", "A16Only").end_object();
    JsonWriter metadata;
    metadata.begin_object().member("name", s.model_id).end_object();
    w.end_array().key("metadata").raw(metadata_with_payload_crc32c(metadata.take(), crcs));
    w.key("provenance").begin_object().key("upgraded_from").begin_object().member("version", s.version);
    w.member("model_id", s.model_id).member("weights_id", s.weights_id).end_object().end_object();
    w.key("files").begin_array();
    for (size_t i = 0; i < files.segment_bytes.size(); ++i) {
        w.begin_object().key("path");
        if (i == 0) w.null();
        else w.value(part_name(entry_name, i));
        w.member("payload_bytes", files.segment_bytes[i]).end_object();
    }
    w.end_array().end_object();
    return w.take();
}

// Copies src [from, from+n) to dst at `to`, data extents only (holes stay holes); `seen` gets
// each piece read (its offset from `from`).
uint64_t copy_extents(int src, uint64_t from, int dst, uint64_t to, uint64_t n, const std::string& path,
                      const std::function<void(uint64_t)>& advanced,
                      const std::function<void(uint64_t, const uint8_t*, size_t)>& seen) {
    std::vector<uint8_t> buf(8u << 20);
    uint64_t end = from + n, copied = 0, pos = from;
    while (pos < end) {
        off_t data = ::lseek(src, off_t(pos), SEEK_DATA);
        if (data < 0 && errno == ENXIO) break; // only a hole remains
        if (data < 0) data = off_t(pos);       // no SEEK_DATA support: copy everything
        if (uint64_t(data) >= end) break;
        off_t hole = ::lseek(src, data, SEEK_HOLE);
        uint64_t stop = hole < 0 ? end : std::min(end, uint64_t(hole));
        for (uint64_t at = uint64_t(data); at < stop;) {
            size_t len = size_t(std::min<uint64_t>(buf.size(), stop - at));
            ssize_t r = ::pread(src, buf.data(), len, off_t(at));
            if (r <= 0) throw Error("read: " + path + ": " + (r < 0 ? std::strerror(errno) : "truncated"));
            IoSegment seg[] = {write_segment(buf.data(), uint64_t(r), to + (at - from))};
            file_write_all(dst, seg, FileIoMode::Plain, path);
            seen(at - from, buf.data(), size_t(r));
            at += uint64_t(r);
            copied += uint64_t(r);
            if (advanced) advanced(at - from);
        }
        pos = stop;
    }
    if (advanced) advanced(n);
    return copied;
}

} // namespace

ArtifactUpgradeResult artifact_upgrade(const std::string& src, const std::string& dst_arg, const ArtifactUpgradeOptions& options) {
    std::string dst = dst_arg.empty() ? src : dst_arg;
    std::string what = "artifact upgrade: " + src + ": ";
    FileDescriptor in = open_regular_file(src, "artifact upgrade"); // a FIFO would block the I/O thread
    Source s;
    try {
        s = read_source(in.get(), src);
    } catch (const Error& e) {
        throw Error(what + e.what());
    }
    struct stat st;
    if (dst != src && ::stat(dst.c_str(), &st) == 0) throw Error("artifact upgrade: " + dst + " exists; remove it or pick another name");

    std::vector<LegacyObject> legacy;
    for (const SourceObject& o : s.objects) legacy.push_back(o.legacy);
    std::vector<PlannedBinding> bindings = plan_bindings(s.model_id, legacy);
    std::vector<PlannedUse> uses = plan_uses(s.model_id, bindings);
    const uint64_t total = s.file_bytes - s.payload_start; // logical payload: the old bytes [P, size)

    // Each object's CRC-32C is computed as the payload is copied; the directory is sized with
    // placeholders of the same width and rewritten with the values before publication.
    std::vector<PayloadCrcs::Object> crc_objects;
    ObjectCrcs placeholder;
    for (const SourceObject& o : s.objects) {
        crc_objects.push_back({o.legacy.name, o.offset, o.bytes});
        placeholder.emplace_back(o.legacy.name, 0);
    }
    PayloadCrcs payload_crcs(std::move(crc_objects));
    uint64_t reserve = 4064;
    std::string json;
    FilePlan files;
    for (;;) {
        files = plan_files(32 + reserve, total, options.file_size_limit);
        json = build_directory(s, bindings, uses, files, base_name(dst), placeholder);
        if (json.size() <= reserve) break;
        reserve = align_up(32 + json.size(), 4096) - 32;
    }
    for (size_t i = 1; i < files.segment_bytes.size(); ++i)
        if (::stat(part_name(dst, i).c_str(), &st) == 0) throw Error("artifact upgrade: " + part_name(dst, i) + " exists");
    json.append(reserve - json.size(), ' ');
    std::array<uint8_t, 16> artifact_id;
    std::random_device rd;
    for (auto& b : artifact_id) b = uint8_t(rd());

    ArtifactUpgradeResult result;
    result.from_version = s.version;
    result.model_id = s.model_id;
    result.destination = dst;
    result.n_objects = s.objects.size();
    result.n_bindings = bindings.size();
    result.n_uses = uses.size();
    result.payload_bytes = total;
    result.n_files = files.segment_bytes.size();

    // Parts first (published before the entry, docs/ARTIFACT_FORMAT.md §1.3), then the entry.
    std::vector<std::unique_ptr<AtomicFile>> outputs;
    uint64_t logical = 0;
    for (size_t i = 0; i < files.segment_bytes.size(); ++i) {
        std::string path = i == 0 ? dst : part_name(dst, i);
        outputs.push_back(std::make_unique<AtomicFile>(path));
        AtomicFile& out = *outputs.back();
        std::vector<uint8_t> head(i == 0 ? 32 : 4096, 0);
        std::memcpy(head.data(), i == 0 ? kMagicV3 : kMagicPart, 8);
        uint64_t second = i == 0 ? reserve : i;
        std::memcpy(head.data() + 8, &second, 8);
        std::memcpy(head.data() + 16, artifact_id.data(), 16);
        uint64_t header_bytes = i == 0 ? 32 + reserve : 4096;
        IoSegment segs[] = {write_segment(head.data(), head.size(), 0), write_segment(json.data(), i == 0 ? reserve : 0, 32)};
        file_write_all(out.fd(), segs, FileIoMode::Plain, out.temp_path());
        uint64_t n = files.segment_bytes[i];
        result.copied_bytes += copy_extents(in.get(), s.payload_start + logical, out.fd(), header_bytes, n, out.temp_path(),
                                            [&](uint64_t done) {
                                                if (options.progress) options.progress(logical + done, total);
                                            },
                                            [&](uint64_t at, const uint8_t* data, size_t len) {
                                                payload_crcs.feed(logical + at, data, len);
                                            });
        if (::ftruncate(out.fd(), off_t(header_bytes + n)) != 0)
            throw Error("artifact upgrade: " + out.temp_path() + ": " + std::strerror(errno));
        logical += n;
    }
    json = build_directory(s, bindings, uses, files, base_name(dst), payload_crcs.crcs(total));
    json.append(reserve - json.size(), ' '); // same length as the placeholder's: hex digits are fixed width
    IoSegment directory[] = {write_segment(json.data(), reserve, 32)};
    file_write_all(outputs[0]->fd(), directory, FileIoMode::Plain, outputs[0]->temp_path());
    for (size_t i = 1; i < outputs.size(); ++i) outputs[i]->commit();
    outputs[0]->commit();
    return result;
}

} // namespace ninfer::core
