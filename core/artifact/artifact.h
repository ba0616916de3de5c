// ninfer::core - read a `.ninfer` V3 artifact (docs/ARTIFACT_FORMAT.md §1.3, §6).
//
// Contract:
// - Artifact::open(path) mmaps the entry file (and, lazily, its part files), runs every check of
//   the reader checklist (docs/ARTIFACT_FORMAT.md §6) eagerly, and throws ninfer::Error with a
//   one-line message naming the problem ("artifact: <file>: truncated: ...", "wrong magic", "object
//   X overlaps ...", "object X stores B bytes; layout requires E", "unknown tensor format X", ...).
//   A v1/v2 file is refused with a message telling the user to run `ninferctl artifact upgrade`.
// - After open, every view is immutable and valid while the Artifact lives; any thread may read.
// - Objects that straddle file boundaries (multi-file sets) are materialised once into owned
//   memory at open, so every StoredTensor has contiguous `data`.
// - binding(name) returns the logical parameter, throwing "artifact: missing parameter NAME" if
//   absent. The model-specific binder (core/model) checks shapes and exact coverage. The reader
//   cannot know a parameter's shape; WeightBinding::shape is the object's shape for a whole-object
//   binding, [rows, K] when every part is whole rows of rank-2 tensors with one K, else
//   [elements]. Parts of quantized tensors must cover whole rows (refused otherwise).
// - Part files are opened and checked (magic, index, artifact_id, length) at open.
#pragma once

#include "core/formats/tensor.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer::core {

struct ArtifactComponent {
    std::string id;                                // "text", "mtp", "vision", ...
    std::string config_json;                       // the component's `config`, as JSON text
    std::optional<std::string> target;             // another component's id
    std::map<std::string, std::string> resources;  // role -> resource object id
    std::string proposal_json;                     // "" if absent
};

struct ArtifactResource {
    std::string id;
    const uint8_t* data = nullptr;
    uint64_t bytes = 0;
    std::string_view text() const { return {reinterpret_cast<const char*>(data), bytes}; }
};

// One Use record (§1.3): weight `parameter` consumed at compute site `input`.
struct ArtifactUse {
    std::string parameter, input;
    std::string activation_policy;                   // "" (absent), A16Only, AllowA8, AllowA4
    std::map<std::string, WeightBinding> auxiliaries; // role -> binding (e.g. activation_input_divisor)
};

class Artifact {
  public:
    static std::unique_ptr<Artifact> open(const std::string& path);
    ~Artifact();
    Artifact(const Artifact&) = delete;
    Artifact& operator=(const Artifact&) = delete;

    const std::string& path() const;
    std::string artifact_id_hex() const; // 32 lowercase hex digits
    uint64_t file_bytes() const;         // entry + parts, on disk
    uint64_t payload_bytes() const;      // logical payload T (sum of files[].payload_bytes)
    size_t file_count() const;           // 1 + number of part files

    const std::map<std::string, ArtifactComponent>& components() const;
    const ArtifactComponent& component(std::string_view id) const; // throws if absent
    bool has_component(std::string_view id) const;

    // The resource a component names for a role, e.g. resource("text", "tokenizer.json").
    const ArtifactResource* resource(std::string_view component, std::string_view role) const;

    const std::map<std::string, ArtifactResource>& resources() const; // by object id
    const std::vector<StoredTensor>& tensors() const; // every tensor object, in directory order
    const std::map<std::string, WeightBinding>& bindings() const;
    const WeightBinding& binding(std::string_view name) const; // throws if absent
    bool has_binding(std::string_view name) const;
    const std::vector<ArtifactUse>& uses() const; // in directory order

    std::string metadata_json() const;   // "{}" if absent
    std::string provenance_json() const; // "{}" if absent
    std::string metadata_name() const;   // metadata.name or "" if absent
    bool is_synthetic() const;           // metadata.synthetic == true (random weights)

    struct Impl;

  private:
    explicit Artifact(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

} // namespace ninfer::core
