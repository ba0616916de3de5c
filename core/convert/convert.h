// ninfer::core - convert a Hugging Face Qwen3.5/3.6 checkpoint directory to a `.ninfer` artifact.
//
// Contract:
// - convert_checkpoint reads config.json, the tokenizer files and the safetensors (see
//   hf_source.h, safetensors.h), detects the key layout (`model.` or `model.language_model.` +
//   `model.visual.` + `mtp.`; fused `mlp.experts.gate_up_proj`/`down_proj` or per-expert keys),
//   checks every tensor the plan needs (present, expected shape, BF16/F16/F32) before writing
//   anything, then converts object by object: rows are read from the mmap in chunks of a few MiB,
//   encoded with the recipe's format (nvfp4 objects whole, since their divisor is per matrix) and
//   streamed to the writer; the source pages are released after each object. Peak memory is about
//   one encoded object plus one chunk. BF16 sources stored as bf16 are copied bit-exactly.
// - Components: `text` always. `mtp` and `vision` follow their ComponentChoice: Auto (the default)
//   keeps each one the checkpoint has (mtp: an `mtp.fc.weight` tensor; vision: a vision_config and
//   a `model.visual.patch_embed.proj.weight` tensor), so converting an official checkpoint never
//   drops its MTP head silently; Include requires it (refused if the checkpoint lacks it); Exclude
//   leaves it out (`ninferctl convert --components text,...` narrows to the listed ones). metadata.name defaults to the output file stem; provenance records the source
//   directory, architecture, recipe and format overrides.
// Errors: ninfer::Error("convert: ..."), ("safetensors: ..."), ("config: ...").
#pragma once

#include "core/convert/emit.h"
#include "core/convert/recipe.h"

#include <cstdint>
#include <string>

namespace ninfer::core {

enum class ComponentChoice : uint8_t { Auto, Include, Exclude };

struct ConvertRequest {
    std::string src_dir;
    std::string out_path;
    std::string tokenizer_file; // "" = src_dir/tokenizer.json
    std::string name;           // metadata.name; "" = output file stem
    Recipe recipe = Recipe::parse(kDefaultRecipe);
    ComponentChoice mtp = ComponentChoice::Auto;
    ComponentChoice vision = ComponentChoice::Auto;
    bool force = false;
    ConvertProgress progress;
};

uint64_t convert_checkpoint(const ConvertRequest& request); // returns bytes written

} // namespace ninfer::core
