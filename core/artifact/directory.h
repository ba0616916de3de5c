// ninfer::core - the parsed, checked V3 JSON directory (docs/ARTIFACT_FORMAT.md §1.3, §6 #4-#14).
//
// Contract (internal to core/artifact):
// - parse_directory(json, entry_filename, prefix) parses the directory text strictly (duplicate
//   members, NaN/Inf, non-integer or negative sizes rejected), enforces every closed member set and
//   type rule, the file table rules, object ordering/alignment/bounds against the total logical
//   payload, format/layout pairing and encoded sizes, resource encodings, and every cross
//   reference (targets, resources, bindings, parts, uses, auxiliaries, proposal, metadata.name).
//   Errors throw ninfer::Error(prefix + one-line reason).
// - Value checks that need payload bytes (divisor scalars) are done by the caller.
#pragma once

#include "core/formats/tensor.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer::core::detail {

struct DirObject {
    std::string id;
    bool is_tensor = true;
    TensorFormat format = TensorFormat::Bf16;
    std::vector<uint64_t> shape;
    uint64_t offset = 0, bytes = 0;
};

struct DirPart {
    size_t object = 0; // index into Directory::objects
    uint64_t begin = 0, end = 0;
};

struct DirBinding {
    bool whole = false; // {"object": id} form
    std::vector<DirPart> parts;
};

struct DirUse {
    std::string parameter, input, activation_policy; // policy "" when absent
    std::vector<std::pair<std::string, DirBinding>> auxiliaries;
};

struct DirComponent {
    std::string id, config_json, proposal_json;
    std::optional<std::string> target;
    std::map<std::string, std::string> resources;
};

struct DirFile {
    std::string path; // "" for the entry (JSON null)
    uint64_t payload_bytes = 0;
};

struct Directory {
    std::map<std::string, DirComponent> components;
    std::vector<DirObject> objects;
    std::vector<std::pair<std::string, DirBinding>> bindings;
    std::vector<DirUse> uses;
    std::vector<DirFile> files;
    uint64_t total_payload = 0;
    std::string metadata_json = "{}", provenance_json = "{}", metadata_name;
    bool synthetic = false;
};

Directory parse_directory(std::string_view json, std::string_view entry_filename,
                          const std::string& prefix);

} // namespace ninfer::core::detail
