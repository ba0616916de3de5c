// ninfer::core - strict checks of the V3 directory JSON (docs/ARTIFACT_FORMAT.md §1.3, §6 #4-#14).
#include "core/artifact/directory.h"

#include "core/artifact/json_strict.h"
#include "core/formats/format.h"
#include "core/formats/layout.h"
#include "core/util/error.h"

#include <algorithm>
#include <set>
#include <unordered_map>

namespace ninfer::core::detail {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

class Parser {
  public:
    explicit Parser(const std::string& prefix) : prefix_(prefix) {}

    [[noreturn]] void fail(const std::string& msg) const { throw Error(prefix_ + msg); }

    simdjson::dom::object object(element e, const std::string& where) const {
        if (!e.is_object())
            fail(where + " must be an object");
        return simdjson::dom::object(e);
    }
    simdjson::dom::array array(element e, const std::string& where) const {
        if (!e.is_array())
            fail(where + " must be an array");
        return simdjson::dom::array(e);
    }
    std::string id(element e, const std::string& where) const {
        if (!e.is_string())
            fail(where + " must be a nonempty string");
        std::string_view s = e.get_string().value();
        if (s.empty())
            fail(where + " must be a nonempty string");
        if (s.find('\0') != std::string_view::npos)
            fail(where + " must not contain U+0000");
        return std::string(s);
    }
    uint64_t u64(element e, const std::string& where) const {
        if (e.type() == element_type::UINT64)
            return e.get_uint64().value();
        if (e.type() == element_type::INT64 && e.get_int64().value() >= 0)
            return uint64_t(e.get_int64().value());
        fail(where + " must be a nonnegative integer");
    }
    uint64_t positive(element e, const std::string& where) const {
        const uint64_t v = u64(e, where);
        if (v == 0)
            fail(where + " must be positive");
        return v;
    }
    // Closed member set: every required member present, nothing outside required+optional.
    void members(simdjson::dom::object o, const std::string& where,
                 std::initializer_list<std::string_view> required,
                 std::initializer_list<std::string_view> optional = {}) const {
        for (auto f : o) {
            if (std::find(required.begin(), required.end(), f.key) == required.end() &&
                std::find(optional.begin(), optional.end(), f.key) == optional.end())
                fail(where + " has unknown member \"" + std::string(f.key) + "\"");
        }
        for (std::string_view r : required)
            if (o[r].error())
                fail(where + " is missing member \"" + std::string(r) + "\"");
    }

  private:
    const std::string& prefix_;
};

struct Context {
    Parser p;
    Directory d;
    std::unordered_map<std::string, size_t> object_index;
    std::unordered_map<std::string, size_t> binding_index;
};

void parse_files(Context& c, element e, std::string_view entry_filename) {
    std::set<std::string> seen;
    for (element f : c.p.array(e, "files")) {
        const std::string where = "files[" + std::to_string(c.d.files.size()) + "]";
        auto o = c.p.object(f, where);
        c.p.members(o, where, {"path", "payload_bytes"});
        DirFile file;
        if (c.d.files.empty()) {
            if (!o["path"].is_null())
                c.p.fail("files[0].path must be null");
        } else {
            file.path = c.p.id(o["path"].value(), where + ".path");
            if (file.path == "." || file.path == ".." || file.path.find('/') != std::string::npos ||
                file.path.find('\\') != std::string::npos || file.path == entry_filename ||
                !seen.insert(file.path).second)
                c.p.fail("invalid or duplicate sibling filename \"" + file.path + "\" in " + where);
        }
        file.payload_bytes = c.p.positive(o["payload_bytes"].value(), where + ".payload_bytes");
        if (__builtin_add_overflow(c.d.total_payload, file.payload_bytes, &c.d.total_payload))
            c.p.fail("total payload_bytes overflows 64 bits");
        c.d.files.push_back(std::move(file));
    }
    if (c.d.files.empty())
        c.p.fail("files must be a nonempty array");
}

void parse_objects(Context& c, element e) {
    uint64_t prev_end = 0;
    for (element oe : c.p.array(e, "objects")) {
        std::string where = "objects[" + std::to_string(c.d.objects.size()) + "]";
        auto o = c.p.object(oe, where);
        DirObject obj;
        if (o["id"].error())
            c.p.fail(where + " is missing member \"id\"");
        obj.id = c.p.id(o["id"].value(), where + ".id");
        where = "object " + obj.id;
        if (o["kind"].error() || !o["kind"].is_string())
            c.p.fail(where + ": kind must be \"tensor\" or \"resource\"");
        const std::string_view kind = o["kind"].get_string().value();
        if (kind == "tensor")
            c.p.members(o, where, {"id", "kind", "shape", "format", "layout", "offset", "bytes"});
        else if (kind == "resource")
            c.p.members(o, where, {"id", "kind", "encoding", "offset", "bytes"});
        else
            c.p.fail(where + ": kind must be \"tensor\" or \"resource\", got \"" + std::string(kind) + "\"");
        obj.is_tensor = kind == "tensor";
        obj.offset = c.p.u64(o["offset"].value(), where + ".offset");
        obj.bytes = c.p.positive(o["bytes"].value(), where + ".bytes");
        uint64_t end;
        if (__builtin_add_overflow(obj.offset, obj.bytes, &end))
            c.p.fail(where + ": offset+bytes overflows 64 bits");
        if (!c.object_index.emplace(obj.id, c.d.objects.size()).second)
            c.p.fail("duplicate object id " + obj.id);
        if (obj.offset < prev_end)
            c.p.fail(where + " overlaps or is out of order (offset " + std::to_string(obj.offset) +
                     " < previous end " + std::to_string(prev_end) + ")");
        if (end > c.d.total_payload)
            c.p.fail(where + " extends beyond the payload (end " + std::to_string(end) + " > " +
                     std::to_string(c.d.total_payload) + ")");
        prev_end = end;
        if (obj.is_tensor) {
            auto shape = c.p.array(o["shape"].value(), where + ".shape");
            if (shape.size() > 16)
                c.p.fail(where + ": shape must have rank 0 through 16");
            for (element d : shape)
                obj.shape.push_back(c.p.positive(d, where + ".shape[]"));
            try {
                shape_elements(obj.shape);
            } catch (const Error&) {
                c.p.fail(where + ": shape element count overflows 64 bits");
            }
            if (!o["format"].is_string())
                c.p.fail(where + ".format must be a string");
            if (!o["layout"].is_string())
                c.p.fail(where + ".layout must be a string");
            const std::string format(o["format"].get_string().value());
            const std::string layout(o["layout"].get_string().value());
            try {
                obj.format = format_from_name(format);
            } catch (const Error&) {
                c.p.fail(where + ": unknown tensor format " + format);
            }
            if (layout != "contiguous_le_v1" && layout != "row_split_k128_v1" &&
                layout != "block_scale_k16_m128x4_v1" && layout != "row_scale_v1")
                c.p.fail(where + ": unknown tensor layout " + layout);
            if (layout != layout_name(obj.format))
                c.p.fail(where + ": layout " + layout + " does not accept format " + format);
            uint64_t expected;
            try {
                expected = encoded_size(obj.format, obj.shape);
            } catch (const Error& err) {
                c.p.fail(where + ": " + std::string(err.what()).substr(sizeof("formats: ") - 1));
            }
            if (obj.bytes != expected)
                c.p.fail(where + " stores " + std::to_string(obj.bytes) + " bytes; layout requires " +
                         std::to_string(expected));
            if (obj.offset % 256 != 0)
                c.p.fail(where + " offset " + std::to_string(obj.offset) + " is not 256-aligned");
        } else {
            if (!o["encoding"].is_string() || o["encoding"].get_string().value() != "raw_bytes_v1")
                c.p.fail(where + ": unknown resource encoding");
        }
        c.d.objects.push_back(std::move(obj));
    }
    if (c.d.objects.empty())
        c.p.fail("objects must be a nonempty array");
}

size_t tensor_ref(Context& c, element e, const std::string& where) {
    const std::string id = c.p.id(e, where + ".object");
    auto it = c.object_index.find(id);
    if (it == c.object_index.end())
        c.p.fail(where + " references missing object " + id);
    if (!c.d.objects[it->second].is_tensor)
        c.p.fail(where + " references resource " + id + " (wrong object kind)");
    return it->second;
}

DirBinding parse_binding(Context& c, element e, const std::string& where) {
    auto o = c.p.object(e, where);
    DirBinding b;
    if (!o["object"].error()) {
        c.p.members(o, where, {"object"});
        const size_t idx = tensor_ref(c, o["object"].value(), where);
        b.whole = true;
        b.parts.push_back({idx, 0, shape_elements(c.d.objects[idx].shape)});
        return b;
    }
    c.p.members(o, where, {"parts"});
    for (element pe : c.p.array(o["parts"].value(), where + ".parts")) {
        const std::string pw = where + ".parts[" + std::to_string(b.parts.size()) + "]";
        auto po = c.p.object(pe, pw);
        c.p.members(po, pw, {"object", "range"});
        const size_t idx = tensor_ref(c, po["object"].value(), pw);
        auto range = c.p.array(po["range"].value(), pw + ".range");
        if (range.size() != 2)
            c.p.fail(pw + ".range must be [begin,end]");
        const uint64_t begin = c.p.u64(range.at(0).value(), pw + ".range[0]");
        const uint64_t end = c.p.u64(range.at(1).value(), pw + ".range[1]");
        const uint64_t elems = shape_elements(c.d.objects[idx].shape);
        if (!(begin < end && end <= elems))
            c.p.fail(pw + " range [" + std::to_string(begin) + "," + std::to_string(end) +
                     ") exceeds source logical elements (" + std::to_string(elems) + ")");
        b.parts.push_back({idx, begin, end});
    }
    if (b.parts.empty())
        c.p.fail(where + ".parts must be nonempty");
    return b;
}

void parse_components(Context& c, element e) {
    auto comps = c.p.object(e, "components");
    for (auto f : comps) {
        DirComponent comp;
        if (f.key.empty() || f.key.find('\0') != std::string_view::npos)
            c.p.fail("component ids must be nonempty strings without U+0000");
        comp.id = std::string(f.key);
        const std::string where = "component " + comp.id;
        auto o = c.p.object(f.value, where);
        c.p.members(o, where, {"config"}, {"target", "resources", "proposal"});
        c.p.object(o["config"].value(), where + ".config");
        comp.config_json = json_text(o["config"].value());
        if (!o["target"].error()) {
            comp.target = c.p.id(o["target"].value(), where + ".target");
            if (comps[*comp.target].error())
                c.p.fail(where + ": missing target component " + *comp.target);
        }
        if (!o["resources"].error()) {
            for (auto r : c.p.object(o["resources"].value(), where + ".resources")) {
                const std::string rid = c.p.id(r.value, where + ".resources." + std::string(r.key));
                auto it = c.object_index.find(rid);
                if (it == c.object_index.end())
                    c.p.fail(where + " resource " + std::string(r.key) + " names missing object " + rid);
                if (c.d.objects[it->second].is_tensor)
                    c.p.fail(where + " resource " + std::string(r.key) + " names tensor " + rid +
                             " (wrong object kind)");
                comp.resources[std::string(r.key)] = rid;
            }
        }
        if (!o["proposal"].error()) {
            if (comp.id != "text")
                c.p.fail("only text may declare proposal (component " + comp.id + ")");
            auto po = c.p.object(o["proposal"].value(), where + ".proposal");
            if (po["domain"].error() || !po["domain"].is_string())
                c.p.fail(where + ".proposal.domain must be \"full\" or \"indexed\"");
            const std::string_view domain = po["domain"].get_string().value();
            if (domain == "full")
                c.p.members(po, where + ".proposal", {"domain"});
            else if (domain == "indexed") {
                c.p.members(po, where + ".proposal", {"domain", "rows"});
                c.p.positive(po["rows"].value(), where + ".proposal.rows");
            } else
                c.p.fail(where + ".proposal.domain must be \"full\" or \"indexed\"");
            comp.proposal_json = json_text(o["proposal"].value());
        }
        c.d.components.emplace(comp.id, std::move(comp));
    }
    if (!c.d.components.count("text"))
        c.p.fail("components must contain \"text\"");
}

void parse_bindings(Context& c, element e) {
    for (auto f : c.p.object(e, "bindings")) {
        if (f.key.empty() || f.key.find('\0') != std::string_view::npos)
            c.p.fail("binding names must be nonempty strings without U+0000");
        const std::string name(f.key);
        c.binding_index.emplace(name, c.d.bindings.size());
        c.d.bindings.emplace_back(name, parse_binding(c, f.value, "binding " + name));
    }
}

void parse_uses(Context& c, element e) {
    std::set<std::pair<std::string, std::string>> seen;
    for (element ue : c.p.array(e, "uses")) {
        const std::string where = "uses[" + std::to_string(c.d.uses.size()) + "]";
        auto o = c.p.object(ue, where);
        c.p.members(o, where, {"parameter", "input"}, {"activation_policy", "auxiliaries"});
        DirUse u;
        u.parameter = c.p.id(o["parameter"].value(), where + ".parameter");
        u.input = c.p.id(o["input"].value(), where + ".input");
        if (!c.binding_index.count(u.parameter))
            c.p.fail(where + ": missing parameter " + u.parameter);
        if (!seen.emplace(u.parameter, u.input).second)
            c.p.fail("duplicate Use (" + u.parameter + ", " + u.input + ")");
        if (!o["activation_policy"].error()) {
            auto pol = o["activation_policy"];
            if (!pol.is_string())
                c.p.fail(where + ": unknown activation policy");
            u.activation_policy = std::string(pol.get_string().value());
            if (u.activation_policy != "A16Only" && u.activation_policy != "AllowA8" &&
                u.activation_policy != "AllowA4")
                c.p.fail(where + ": unknown activation policy " + u.activation_policy);
        }
        if (!o["auxiliaries"].error()) {
            for (auto a : c.p.object(o["auxiliaries"].value(), where + ".auxiliaries")) {
                const std::string aw = where + ".auxiliaries." + std::string(a.key);
                DirBinding b = parse_binding(c, a.value, aw);
                if (a.key == "activation_input_divisor") {
                    uint64_t n = 0;
                    for (const DirPart& part : b.parts)
                        n += part.end - part.begin;
                    if (n != 1 || c.d.objects[b.parts[0].object].format != TensorFormat::Fp32)
                        c.p.fail(aw + " must be one FP32 element");
                }
                u.auxiliaries.emplace_back(std::string(a.key), std::move(b));
            }
        }
        c.d.uses.push_back(std::move(u));
    }
}

} // namespace

Directory parse_directory(std::string_view json, std::string_view entry_filename,
                          const std::string& prefix) {
    simdjson::dom::parser parser;
    element root = parse_json_strict(parser, json, prefix);
    Context c{Parser(prefix), {}, {}, {}};
    auto o = c.p.object(root, "directory root");
    c.p.members(o, "directory root", {"components", "objects", "bindings", "uses", "files"},
                {"metadata", "provenance"});
    parse_files(c, o["files"].value(), entry_filename);
    parse_objects(c, o["objects"].value());
    parse_components(c, o["components"].value());
    parse_bindings(c, o["bindings"].value());
    parse_uses(c, o["uses"].value());
    if (!o["metadata"].error()) {
        auto m = c.p.object(o["metadata"].value(), "metadata");
        if (!m["name"].error())
            c.d.metadata_name = c.p.id(m["name"].value(), "metadata.name");
        c.d.synthetic = !m["synthetic"].error() && m["synthetic"].is_bool() &&
                        m["synthetic"].get_bool().value();
        c.d.metadata_json = json_text(o["metadata"].value());
    }
    if (!o["provenance"].error()) {
        c.p.object(o["provenance"].value(), "provenance");
        c.d.provenance_json = json_text(o["provenance"].value());
    }
    return std::move(c.d);
}

} // namespace ninfer::core::detail
