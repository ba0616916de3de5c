// ninfer::core - the published v1/v2 groupwise-int inventories (docs/ARTIFACT_FORMAT.md §4.1) and
// their v3 bindings and uses (docs/ARTIFACT_FORMAT.md §4.3), shared by the upgrade (which checks an
// input against them) and its tests (which build full-inventory sparse files from them).
//
// Contract:
// - legacy_inventory(model_id) lists every object of "qwen3.6-27b" (1124) or "qwen3.6-35b-a3b"
//   (940) in writer order: resources first (sizes are not fixed: `bytes` 0), then tensors with
//   their shape and format. Other model ids throw ninfer::Error.
// - plan_bindings(model_id, objects) maps legacy object names to v3 logical parameters: whole
//   objects or consecutive row blocks / element ranges of fused parents, in directory order; and
//   plan_uses lists the Use records with their compute-site inputs (A16Only for every groupwise
//   parent). Counts: 27B 1422 bindings / 785 uses, 35B 32713 / 32184.
// - The vision block prefix of v1 names is taken to be "vision/blocks/{b}/"
//   (upstream's documents name the members, not the prefix; docs/ARTIFACT_FORMAT.md §4.1).
#pragma once

#include "core/formats/tensor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ninfer::core {

struct LegacyObject {
    std::string name;
    bool is_tensor = true;
    std::vector<uint64_t> shape;
    TensorFormat format = TensorFormat::Bf16;
};

struct PlannedPart {
    std::string object;
    uint64_t begin = 0, end = 0; // element range; whole = [0, elements)
};
struct PlannedBinding {
    std::string parameter;
    std::vector<PlannedPart> parts; // one part covering the whole object = {"object": id}
    bool whole = false;
};
struct PlannedUse {
    std::string parameter, input;
};

std::vector<LegacyObject> legacy_inventory(const std::string& model_id);
std::vector<PlannedBinding> plan_bindings(const std::string& model_id, const std::vector<LegacyObject>& objects);
std::vector<PlannedUse> plan_uses(const std::string& model_id, const std::vector<PlannedBinding>& bindings);

} // namespace ninfer::core
