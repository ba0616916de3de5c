// ninfer::core - write a converted or synthetic artifact from an object plan: resources,
// components, every planned object (encoded one at a time by a producer), bindings, metadata.
//
// Contract:
// - emit_artifact streams objects in plan order. With `produce_stream` set it opens each object
//   as an ArtifactWriter tensor stream and calls `produce_stream(object, format, sink)`, which
//   must hand every byte of the encoding to sink(offset, bytes) exactly once, in any order: peak
//   memory is whatever the producer holds. Otherwise it calls `produce(object, format, out)`,
//   which must fill `out` (already sized to encoded_size and zeroed): peak memory is one encoded
//   object plus the producer's.
// - Resource roles of `text`: tokenizer.json, tokenizer_config.json, chat_template.jinja,
//   generation_config.json (ids "resource/text/<role>"); `vision` gets its extra resources.
//   `mtp` and `vision` components target `text`. metadata = {"name", "synthetic"}; provenance is
//   the caller's JSON object.
// - progress(done_bytes, total_bytes, object_id) is called before each object and once at the end
//   with done == total. Returns the bytes written (all files).
// Thread safety: single-threaded; the producer may use threads internally.
#pragma once

#include "core/convert/plan.h"
#include "core/convert/row_chunks.h"
#include "core/formats/tensor.h"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ninfer::core {

struct TextResources {
    std::string tokenizer_json;
    std::string tokenizer_config_json;
    std::string chat_template;
    std::string generation_config_json;
};

using ConvertProgress = std::function<void(uint64_t done_bytes, uint64_t total_bytes, std::string_view object)>;
using ObjectProducer = std::function<void(const PlannedObject& object, TensorFormat format, std::vector<uint8_t>& out)>;
using StreamingProducer = std::function<void(const PlannedObject& object, TensorFormat format, const ObjectSink& sink)>;

struct EmitRequest {
    std::string out_path;
    bool force = false;
    const ModelConfig* config = nullptr;
    const std::vector<PlannedObject>* plan = nullptr;
    const Recipe* recipe = nullptr;
    TextResources text_resources;
    bool with_mtp = false;
    bool with_vision = false;
    std::string vision_config_json;
    std::vector<std::pair<std::string, std::string>> vision_resources; // role -> bytes
    std::string name;
    bool synthetic = false;
    std::string provenance_json = "{}";
    ObjectProducer produce;
    StreamingProducer produce_stream; // preferred when set
    ConvertProgress progress;
};

uint64_t emit_artifact(const EmitRequest& request);

} // namespace ninfer::core
