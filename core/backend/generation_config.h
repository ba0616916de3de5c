// ninfer::core - the model's generation_config.json (stored in the artifact by the converter) as
// stop ids and sampling defaults, and the one rule that turns defaults into a request's sampling,
// shared by ninferd's HTTP APIs and `ninferctl run` so both sample alike.
//
// Contract:
// - SamplingDefaults holds the values one layer sets; an unset field defers to the layer below.
//   Layers, lowest first: kSamplingFallback (OpenAI's neutral values: temperature 1, top_p 1,
//   top_k 0 = all, min_p 0, penalties 0 and 1), the model's generation_config.json, the server's
//   options (--temperature ...), the request's own fields.
// - parse_generation_config(json) reads eos_token_id (an int or a list) and temperature, top_p,
//   top_k, min_p, repetition_penalty, presence_penalty, frequency_penalty, seed when they are
//   numbers; "do_sample": false means greedy (temperature 0). Other members are ignored. Invalid
//   JSON, a non-object root or an out-of-range value throw ninfer::Error("generation_config: ...").
// - sampling_defaults_over(base, over): over's set fields replace base's.
// - resolve_sampling(layers...) folds the layers over kSamplingFallback into SamplingParams.
// Thread safety: pure.
#pragma once

#include "core/backend/sampling.h"

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace ninfer::core {

struct SamplingDefaults {
    std::optional<float> temperature, top_p, min_p;
    std::optional<int32_t> top_k;
    std::optional<float> presence_penalty, frequency_penalty, repetition_penalty;
    std::optional<uint64_t> seed;

    bool operator==(const SamplingDefaults&) const = default;
};

struct GenerationConfig {
    std::vector<int32_t> stop_ids;
    SamplingDefaults sampling;
};

inline const SamplingDefaults kSamplingFallback{1.0f, 1.0f, 0.0f, 0, 0.0f, 0.0f, 1.0f, std::nullopt};

GenerationConfig parse_generation_config(std::string_view json);
SamplingDefaults sampling_defaults_over(SamplingDefaults base, const SamplingDefaults& over);
// kSamplingFallback, then model, then server, then request; seed stays 0 when no layer sets it.
SamplingParams resolve_sampling(const SamplingDefaults& model, const SamplingDefaults& server,
                                const SamplingDefaults& request);

} // namespace ninfer::core
