// ninfer::core - stream a planned artifact through the ArtifactWriter.
#include "core/convert/emit.h"

#include "core/artifact/writer.h"
#include "core/formats/format.h"
#include "core/util/error.h"
#include "core/util/json_writer.h"

#include <cstdio>

namespace ninfer::core {
namespace {

std::span<const uint8_t> bytes_of(const std::string& s) {
    return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::string add_text_resource(ArtifactWriter& w, const std::string& component, const std::string& role,
                              const std::string& bytes) {
    if (bytes.empty())
        throw Error("convert: resource " + role + " is empty");
    return w.add_resource("resource/" + component + "/" + role, bytes_of(bytes));
}

// A generous guess at the entry header E for this plan (directory JSON: ~200 bytes of fixed
// members per object, ~80 per binding, the configs). Large artifacts stream their payload behind
// this room, so publication writes the header in place instead of moving gigabytes; small ones
// keep the smallest header. Too small a guess is still correct (the writer inserts or copies).
uint64_t header_reserve_for(const EmitRequest& r, uint64_t payload) {
    constexpr uint64_t kInPlaceFrom = 64ull << 20;
    if (payload < kInPlaceFrom)
        return 0;
    uint64_t bytes = 64 * 1024 + r.config->to_json().size() + r.vision_config_json.size() + r.provenance_json.size();
    for (const PlannedObject& o : *r.plan) {
        bytes += 256 + o.id.size();
        for (const PlannedBinding& b : o.bindings)
            bytes += 96 + b.parameter.size() + o.id.size();
    }
    return (bytes + 4095) / 4096 * 4096;
}

} // namespace

uint64_t emit_artifact(const EmitRequest& r) {
    const std::vector<PlannedObject>& plan = *r.plan;
    check_plan_formats(plan, *r.recipe);
    const uint64_t total = plan_encoded_bytes(plan, *r.recipe);

    ArtifactWriter w(r.out_path, ArtifactWriterOptions{.force = r.force, .header_reserve = header_reserve_for(r, total)});
    std::vector<std::pair<std::string, std::string>> text_roles;
    const std::pair<const char*, const std::string*> roles[] = {
        {"tokenizer.json", &r.text_resources.tokenizer_json},
        {"tokenizer_config.json", &r.text_resources.tokenizer_config_json},
        {"chat_template.jinja", &r.text_resources.chat_template},
        {"generation_config.json", &r.text_resources.generation_config_json},
    };
    for (auto& [role, bytes] : roles)
        text_roles.emplace_back(role, add_text_resource(w, "text", role, *bytes));
    std::vector<std::pair<std::string, std::string>> vision_roles;
    if (r.with_vision)
        for (auto& [role, bytes] : r.vision_resources)
            vision_roles.emplace_back(role, add_text_resource(w, "vision", role, bytes));

    std::vector<uint8_t> encoded;
    uint64_t done = 0;
    for (const PlannedObject& o : plan) {
        if (r.progress)
            r.progress(done, total, o.id);
        TensorFormat f = r.recipe->format(o.group);
        uint64_t size = encoded_size(f, o.shape);
        std::string id;
        if (r.produce_stream) {
            const ArtifactWriter::TensorStream stream = w.begin_tensor(o.id, f, o.shape);
            r.produce_stream(o, f, [&](uint64_t offset, std::span<const uint8_t> bytes) {
                w.write(stream, offset, bytes);
            });
            id = w.end_tensor(stream);
        } else {
            encoded.assign(size, 0);
            r.produce(o, f, encoded);
            if (encoded.size() != size)
                throw Error("convert: object " + o.id + " was produced with the wrong size");
            id = w.add_tensor(o.id, f, o.shape, encoded);
        }
        const uint64_t elems = o.rows() * o.cols();
        for (const PlannedBinding& b : o.bindings) {
            if (b.elem_begin == 0 && b.elem_end == elems)
                w.bind(b.parameter, id);
            else
                w.bind_parts(b.parameter, {{id, b.elem_begin, b.elem_end}});
        }
        done += size;
    }
    encoded = {};

    w.add_component("text", r.config->to_json(), {}, text_roles);
    if (r.with_mtp) {
        const char* arch = r.config->is_moe() ? "Qwen3_5MoeMTP" : "Qwen3_5MTP";
        w.add_component("mtp", std::string("{\"architectures\":[\"") + arch + "\"],\"num_hidden_layers\":1}",
                        "text");
    }
    if (r.with_vision)
        w.add_component("vision", r.vision_config_json, "text", vision_roles);
    w.set_metadata_json("{\"name\":" + json_quote(r.name) +
                        ",\"synthetic\":" + (r.synthetic ? "true" : "false") + "}");
    w.set_provenance_json(r.provenance_json);
    uint64_t written = w.finish();
    if (r.progress)
        r.progress(total, total, "");
    return written;
}

} // namespace ninfer::core
