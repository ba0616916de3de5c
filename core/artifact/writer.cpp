// ninfer::core - .ninfer V3 writer: streamed payload, reserve-loop directory, sharding, publication.
#include "core/artifact/writer.h"

#include "core/artifact/checksums.h"
#include "core/artifact/json_strict.h"
#include "core/artifact/writer_files.h"
#include "core/formats/format.h"
#include "core/formats/layout.h"
#include "core/util/crc32c.h"
#include "core/util/error.h"
#include "core/util/json_writer.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>
#include <unordered_map>

namespace ninfer::core {

struct ArtifactWriter::Impl {
    struct Object {
        std::string id;
        bool is_tensor = true;
        TensorFormat format = TensorFormat::Bf16;
        std::vector<uint64_t> shape;
        uint64_t offset = 0, bytes = 0;
        uint32_t crc32c = 0; // of the payload bytes, recorded in metadata.payload_crc32c
    };
    struct Component {
        std::string id, config_json, target, proposal_json;
        std::vector<std::pair<std::string, std::string>> resources;
    };
    struct Binding {
        std::string object; // whole-object binding when parts is empty
        std::vector<PartRef> parts;
    };

    std::string path;
    ArtifactWriterOptions options;
    detail::WriterFiles files;
    uint64_t cursor = 0;
    std::vector<Object> objects;
    std::unordered_map<std::string, size_t> object_index;
    std::vector<Component> components;
    std::vector<std::pair<std::string, Binding>> bindings;
    std::unordered_map<std::string, size_t> binding_index;
    std::vector<Use> uses;
    // Open tensor streams: object index -> written byte ranges [begin, end) with the CRC-32C of
    // their bytes, disjoint, merged (CRCs combined) when adjacent.
    struct Written {
        uint64_t end;
        uint32_t crc32c;
    };
    std::map<size_t, std::map<uint64_t, Written>> open_streams;
    std::string metadata_json = "{}", provenance_json = "{}";
    bool finished = false, failed = false;

    Impl(std::string p, ArtifactWriterOptions o)
        : path(std::move(p)), options(o), files(path, o.force, reserved_header(o)) {}

    static uint64_t reserved_header(const ArtifactWriterOptions& o) {
        return (o.header_reserve + 4095) / 4096 * 4096;
    }

    std::string prefix() const { return "artifact writer: " + path + ": "; }
    [[noreturn]] void fail(const std::string& msg) const { throw Error(prefix() + msg); }

    void check_open() const {
        if (finished)
            fail("already finished");
        if (failed)
            fail("an earlier error left this writer unusable");
    }

    void check_id(const std::string& id, const char* what) const {
        if (id.empty() || id.find('\0') != std::string::npos)
            fail(std::string(what) + " id must be a nonempty string without NUL");
    }

    const Object& object(const std::string& id) const {
        auto it = object_index.find(id);
        if (it == object_index.end())
            fail("unknown object " + id);
        return objects[it->second];
    }

    const Object& tensor(const std::string& id) const {
        const Object& o = object(id);
        if (!o.is_tensor)
            fail("object " + id + " is a resource, a binding needs a tensor (wrong object kind)");
        return o;
    }

    void check_parts(const std::vector<PartRef>& parts, const std::string& what) const {
        if (parts.empty())
            fail(what + " has no parts");
        for (const PartRef& p : parts) {
            const Object& o = tensor(p.object_id);
            const uint64_t elems = shape_elements(o.shape);
            if (!(p.begin < p.end && p.end <= elems))
                fail(what + ": range [" + std::to_string(p.begin) + "," + std::to_string(p.end) +
                     ") exceeds the " + std::to_string(elems) + " elements of " + p.object_id);
            const uint64_t k = o.shape.empty() ? 1 : o.shape.back();
            if (format_is_quantized(o.format) && (p.begin % k != 0 || p.end % k != 0))
                fail(what + ": range of quantized tensor " + p.object_id +
                     " does not cover whole rows");
        }
    }

    uint64_t place(std::string id, bool is_tensor, uint64_t align) {
        check_open();
        check_id(id, "object");
        if (object_index.count(id))
            fail("duplicate object id " + id);
        const uint64_t offset = (cursor + align - 1) / align * align;
        object_index.emplace(id, objects.size());
        Object o;
        o.id = std::move(id);
        o.is_tensor = is_tensor;
        o.offset = offset;
        objects.push_back(std::move(o));
        return offset;
    }

    void write_binding(JsonWriter& w, const Binding& b) const {
        w.begin_object();
        if (b.parts.empty()) {
            w.member("object", b.object);
        } else {
            w.key("parts").begin_array();
            for (const PartRef& p : b.parts) {
                w.begin_object().member("object", p.object_id).key("range").begin_array();
                w.value(p.begin).value(p.end).end_array().end_object();
            }
            w.end_array();
        }
        w.end_object();
    }

    std::string directory_json(const std::vector<detail::FileSegment>& segs) const;
    void validate_before_finish() const;
};

std::string ArtifactWriter::Impl::directory_json(const std::vector<detail::FileSegment>& segs) const {
    JsonWriter w;
    w.begin_object().key("components").begin_object();
    for (const Component& c : components) {
        w.key(c.id).begin_object().key("config").raw(c.config_json);
        if (!c.target.empty())
            w.member("target", c.target);
        w.key("resources").begin_object();
        for (const auto& [role, id] : c.resources)
            w.member(role, id);
        w.end_object();
        if (!c.proposal_json.empty())
            w.key("proposal").raw(c.proposal_json);
        w.end_object();
    }
    w.end_object().key("objects").begin_array();
    for (const Object& o : objects) {
        w.begin_object().member("id", o.id);
        if (o.is_tensor) {
            w.member("kind", "tensor").key("shape").begin_array();
            for (uint64_t d : o.shape)
                w.value(d);
            w.end_array().member("format", format_name(o.format)).member("layout", layout_name(o.format));
        } else {
            w.member("kind", "resource").member("encoding", "raw_bytes_v1");
        }
        w.member("offset", o.offset).member("bytes", o.bytes).end_object();
    }
    w.end_array().key("bindings").begin_object();
    for (const auto& [name, b] : bindings) {
        w.key(name);
        write_binding(w, b);
    }
    w.end_object().key("uses").begin_array();
    for (const Use& u : uses) {
        w.begin_object().member("parameter", u.parameter).member("input", u.input);
        if (!u.activation_policy.empty())
            w.member("activation_policy", u.activation_policy);
        if (!u.auxiliaries.empty()) {
            w.key("auxiliaries").begin_object();
            for (const auto& [role, parts] : u.auxiliaries) {
                w.key(role);
                write_binding(w, Binding{{}, parts});
            }
            w.end_object();
        }
        w.end_object();
    }
    std::vector<std::pair<std::string_view, uint32_t>> crcs;
    for (const Object& o : objects) crcs.emplace_back(o.id, o.crc32c);
    w.end_array().key("metadata").raw(metadata_with_payload_crc32c(metadata_json, crcs));
    w.key("provenance").raw(provenance_json);
    w.key("files").begin_array();
    for (size_t i = 0; i < segs.size(); ++i) {
        w.begin_object().key("path");
        if (i == 0)
            w.null();
        else
            w.value(segs[i].name);
        w.member("payload_bytes", segs[i].payload_bytes).end_object();
    }
    w.end_array().end_object();
    return w.take();
}

void ArtifactWriter::Impl::validate_before_finish() const {
    if (objects.empty())
        fail("an artifact needs at least one object");
    bool has_text = false;
    for (const Component& c : components) {
        has_text |= c.id == "text";
        if (!c.target.empty()) {
            bool found = false;
            for (const Component& t : components)
                found |= t.id == c.target;
            if (!found)
                fail("component " + c.id + " targets missing component " + c.target);
        }
        for (const auto& [role, id] : c.resources)
            if (object(id).is_tensor)
                fail("component " + c.id + " resource " + role + " names tensor " + id +
                     " (wrong object kind)");
    }
    if (!has_text)
        fail("an artifact needs a \"text\" component");
    for (const Use& u : uses)
        if (!binding_index.count(u.parameter))
            fail("use of missing parameter " + u.parameter);
}

ArtifactWriter::ArtifactWriter(std::string path, ArtifactWriterOptions options)
    : impl_(std::make_unique<Impl>(std::move(path), options)) {}

ArtifactWriter::~ArtifactWriter() = default; // WriterFiles removes temps unless published

std::string ArtifactWriter::add_resource(std::string id, std::span<const uint8_t> bytes) {
    if (bytes.empty())
        impl_->fail("resource " + id + " is empty");
    const uint64_t offset = impl_->place(id, false, 1);
    try {
        impl_->files.write_payload(offset, bytes.data(), bytes.size());
    } catch (...) {
        impl_->failed = true;
        throw;
    }
    impl_->objects.back().bytes = bytes.size();
    impl_->objects.back().crc32c = crc32c_extend(0, bytes.data(), bytes.size());
    impl_->cursor = offset + bytes.size();
    return id;
}

std::string ArtifactWriter::add_tensor(std::string id, TensorFormat format,
                                       std::vector<uint64_t> shape,
                                       std::span<const uint8_t> encoded) {
    const uint64_t expected = encoded_size(format, shape);
    if (encoded.size() != expected)
        impl_->fail("tensor " + id + " has " + std::to_string(encoded.size()) +
                    " bytes; layout requires " + std::to_string(expected));
    const TensorStream stream = begin_tensor(std::move(id), format, std::move(shape));
    write(stream, 0, encoded);
    return end_tensor(stream);
}

ArtifactWriter::TensorStream ArtifactWriter::begin_tensor(std::string id, TensorFormat format,
                                                          std::vector<uint64_t> shape) {
    const uint64_t bytes = encoded_size(format, shape);
    const uint64_t offset = impl_->place(std::move(id), true, 256);
    Impl::Object& o = impl_->objects.back();
    o.format = format;
    o.shape = std::move(shape);
    o.bytes = bytes;
    impl_->cursor = offset + bytes;
    const size_t index = impl_->objects.size() - 1;
    impl_->open_streams[index];
    return TensorStream{index};
}

void ArtifactWriter::write(const TensorStream& stream, uint64_t offset, std::span<const uint8_t> bytes) {
    impl_->check_open();
    auto open = impl_->open_streams.find(stream.object);
    if (open == impl_->open_streams.end())
        impl_->fail("write to a tensor stream that is not open");
    const Impl::Object& o = impl_->objects[stream.object];
    const uint64_t begin = offset, end = offset + bytes.size();
    if (end < begin || end > o.bytes)
        impl_->fail("tensor " + o.id + ": write [" + std::to_string(begin) + "," + std::to_string(end) +
                    ") exceeds its " + std::to_string(o.bytes) + " bytes");
    if (bytes.empty())
        return;
    std::map<uint64_t, Impl::Written>& done = open->second;
    auto next = done.lower_bound(end); // first range starting at or after `end`
    auto prev = next == done.begin() ? done.end() : std::prev(next);
    if (prev != done.end() && prev->second.end > begin && prev->first < end)
        impl_->fail("tensor " + o.id + ": bytes [" + std::to_string(std::max(begin, prev->first)) + "," +
                    std::to_string(std::min(end, prev->second.end)) + ") written twice");
    try {
        impl_->files.write_payload(o.offset + begin, bytes.data(), bytes.size());
    } catch (...) {
        impl_->failed = true;
        throw;
    }
    uint64_t merged_begin = begin;
    Impl::Written merged{end, crc32c_extend(0, bytes.data(), bytes.size())};
    if (next != done.end() && next->first == end) {
        merged.crc32c = crc32c_combine(merged.crc32c, next->second.crc32c, next->second.end - next->first);
        merged.end = next->second.end;
        done.erase(next);
    }
    if (prev != done.end() && prev->second.end == begin) {
        merged.crc32c = crc32c_combine(prev->second.crc32c, merged.crc32c, merged.end - begin);
        merged_begin = prev->first;
        done.erase(prev);
    }
    done.emplace(merged_begin, merged);
}

std::string ArtifactWriter::end_tensor(const TensorStream& stream) {
    impl_->check_open();
    auto open = impl_->open_streams.find(stream.object);
    if (open == impl_->open_streams.end())
        impl_->fail("end of a tensor stream that is not open");
    Impl::Object& o = impl_->objects[stream.object];
    const std::map<uint64_t, Impl::Written>& done = open->second;
    const bool complete = o.bytes == 0 ? done.empty()
                                        : done.size() == 1 && done.begin()->first == 0 && done.begin()->second.end == o.bytes;
    if (!complete) {
        uint64_t gap = 0; // first byte not written
        if (!done.empty() && done.begin()->first == 0)
            gap = done.begin()->second.end;
        impl_->fail("tensor " + o.id + ": byte " + std::to_string(gap) + " of " + std::to_string(o.bytes) +
                    " was never written");
    }
    o.crc32c = done.empty() ? 0 : done.begin()->second.crc32c;
    impl_->open_streams.erase(open);
    return o.id;
}

void ArtifactWriter::add_component(std::string id, std::string config_json, std::string target,
                                   std::vector<std::pair<std::string, std::string>> resources,
                                   std::string proposal_json) {
    impl_->check_open();
    impl_->check_id(id, "component");
    for (const Impl::Component& c : impl_->components)
        if (c.id == id)
            impl_->fail("duplicate component " + id);
    if (!proposal_json.empty() && id != "text")
        impl_->fail("only text may declare proposal (component " + id + ")");
    simdjson::dom::parser parser;
    const std::string where = impl_->prefix() + "component " + id + ": ";
    if (!detail::parse_json_strict(parser, config_json, where + "config: ").is_object())
        impl_->fail("component " + id + " config must be a JSON object");
    if (!proposal_json.empty() &&
        !detail::parse_json_strict(parser, proposal_json, where + "proposal: ").is_object())
        impl_->fail("component " + id + " proposal must be a JSON object");
    impl_->components.push_back({std::move(id), std::move(config_json), std::move(target),
                                 std::move(proposal_json), std::move(resources)});
}

void ArtifactWriter::bind(std::string parameter, const std::string& object_id) {
    impl_->check_open();
    impl_->tensor(object_id);
    impl_->check_id(parameter, "parameter");
    if (impl_->binding_index.count(parameter))
        impl_->fail("duplicate binding " + parameter);
    impl_->binding_index.emplace(parameter, impl_->bindings.size());
    impl_->bindings.push_back({std::move(parameter), Impl::Binding{object_id, {}}});
}

void ArtifactWriter::bind_rows(std::string parameter, const std::string& object_id,
                               uint64_t row_begin, uint64_t row_end) {
    const Impl::Object& o = impl_->tensor(object_id);
    if (o.shape.size() != 2)
        impl_->fail("bind_rows needs a rank-2 tensor, " + object_id + " is not");
    bind_parts(std::move(parameter),
               {PartRef{object_id, row_begin * o.shape[1], row_end * o.shape[1]}});
}

void ArtifactWriter::bind_parts(std::string parameter, std::vector<PartRef> parts) {
    impl_->check_open();
    impl_->check_id(parameter, "parameter");
    impl_->check_parts(parts, "binding " + parameter);
    if (impl_->binding_index.count(parameter))
        impl_->fail("duplicate binding " + parameter);
    impl_->binding_index.emplace(parameter, impl_->bindings.size());
    impl_->bindings.push_back({std::move(parameter), Impl::Binding{{}, std::move(parts)}});
}

void ArtifactWriter::add_use(Use use) {
    impl_->check_open();
    impl_->check_id(use.input, "use input");
    static const char* kPolicies[] = {"", "A16Only", "AllowA8", "AllowA4"};
    bool known = false;
    for (const char* p : kPolicies)
        known |= use.activation_policy == p;
    if (!known)
        impl_->fail("unknown activation policy " + use.activation_policy);
    for (const Use& u : impl_->uses)
        if (u.parameter == use.parameter && u.input == use.input)
            impl_->fail("duplicate Use (" + use.parameter + ", " + use.input + ")");
    for (const auto& [role, parts] : use.auxiliaries)
        impl_->check_parts(parts, "auxiliary " + role + " of " + use.parameter);
    impl_->uses.push_back(std::move(use));
}

void ArtifactWriter::set_metadata_json(std::string json) {
    simdjson::dom::parser parser;
    auto root = detail::parse_json_strict(parser, json, impl_->prefix() + "metadata: ");
    if (!root.is_object())
        impl_->fail("metadata must be a JSON object");
    auto name = root["name"];
    if (name.error() || !name.is_string() || name.get_string().value().empty())
        impl_->fail("metadata must contain \"name\" (a nonempty string)");
    if (!root[kPayloadCrc32cMember].error())
        impl_->fail(std::string("metadata member ") + kPayloadCrc32cMember + " is written by the writer itself");
    impl_->metadata_json = std::move(json);
}

void ArtifactWriter::set_provenance_json(std::string json) {
    simdjson::dom::parser parser;
    if (!detail::parse_json_strict(parser, json, impl_->prefix() + "provenance: ").is_object())
        impl_->fail("provenance must be a JSON object");
    impl_->provenance_json = std::move(json);
}

uint64_t ArtifactWriter::payload_bytes() const { return impl_->cursor; }

uint64_t ArtifactWriter::finish() {
    impl_->check_open();
    if (!impl_->open_streams.empty())
        impl_->fail("tensor " + impl_->objects[impl_->open_streams.begin()->first].id +
                    " is still open (end_tensor was not called)");
    try {
        impl_->validate_before_finish();
        const uint64_t total = impl_->cursor;
        // Reserve loop (docs/ARTIFACT_FORMAT.md §1.3): the file table depends on E, and E on the
        // directory's length.
        uint64_t reserve = std::max<uint64_t>(4096, Impl::reserved_header(impl_->options)) - 32;
        std::vector<detail::FileSegment> segs;
        std::string json;
        for (;;) {
            segs = detail::plan_segments(impl_->path, 32 + reserve, total,
                                         impl_->options.file_size_limit);
            json = impl_->directory_json(segs);
            if (json.size() <= reserve)
                break;
            reserve = (32 + json.size() + 4095) / 4096 * 4096 - 32;
        }
        json.append(reserve - json.size(), ' ');
        const uint64_t written = impl_->files.publish(json, segs, total);
        impl_->finished = true;
        return written;
    } catch (...) {
        impl_->failed = true;
        impl_->files.abandon();
        throw;
    }
}

} // namespace ninfer::core
