// ninfer::core - generation_config.json -> stop ids and sampling defaults; layered sampling.
#include "core/backend/generation_config.h"

#include "core/util/error.h"

#include <simdjson.h>

#include <string>

namespace ninfer::core {
namespace {

[[noreturn]] void fail(const std::string& message) { throw Error("generation_config: " + message); }

std::optional<double> number_in(simdjson::dom::object root, const char* key, double lo, double hi) {
    simdjson::dom::element e;
    if (root[key].get(e) || e.is_null()) return std::nullopt;
    double v = 0;
    if (e.is_int64()) v = double(int64_t(e.get_int64()));
    else if (e.is_uint64()) v = double(uint64_t(e.get_uint64()));
    else if (e.is_double()) v = double(e.get_double());
    else return std::nullopt; // not a number: ignored like any member we do not read
    if (!(v >= lo && v <= hi))
        fail(std::string(key) + " " + std::to_string(v) + " is outside " + std::to_string(lo) + ".." + std::to_string(hi));
    return v;
}

template <typename T> void over(std::optional<T>& base, const std::optional<T>& top) {
    if (top) base = top;
}

} // namespace

GenerationConfig parse_generation_config(std::string_view json) {
    simdjson::dom::parser parser;
    simdjson::padded_string padded(json);
    simdjson::dom::element root_el;
    if (parser.parse(padded).get(root_el)) fail("not valid JSON");
    if (!root_el.is_object()) fail("not a JSON object");
    simdjson::dom::object root = root_el.get_object();
    GenerationConfig g;
    simdjson::dom::element e;
    if (!root["eos_token_id"].get(e)) {
        auto add = [&](simdjson::dom::element x) {
            if (!x.is_int64() || int64_t(x.get_int64()) < 0 || int64_t(x.get_int64()) > INT32_MAX)
                fail("eos_token_id must hold token ids");
            g.stop_ids.push_back(int32_t(int64_t(x.get_int64())));
        };
        if (e.is_array()) for (simdjson::dom::element x : e.get_array()) add(x);
        else if (!e.is_null()) add(e);
    }
    SamplingDefaults& s = g.sampling;
    if (auto v = number_in(root, "temperature", 0, 100)) s.temperature = float(*v);
    if (auto v = number_in(root, "top_p", 0, 1)) s.top_p = float(*v);
    if (auto v = number_in(root, "top_k", -1, INT32_MAX)) s.top_k = *v < 0 ? 0 : int32_t(*v);
    if (auto v = number_in(root, "min_p", 0, 1)) s.min_p = float(*v);
    if (auto v = number_in(root, "presence_penalty", -2, 2)) s.presence_penalty = float(*v);
    if (auto v = number_in(root, "frequency_penalty", -2, 2)) s.frequency_penalty = float(*v);
    if (auto v = number_in(root, "repetition_penalty", 0.01, 10)) s.repetition_penalty = float(*v);
    if (auto v = number_in(root, "seed", 0, 9e15)) s.seed = uint64_t(*v);
    if (!root["do_sample"].get(e) && e.is_bool() && !bool(e.get_bool())) s.temperature = 0.0f;
    return g;
}

SamplingDefaults sampling_defaults_over(SamplingDefaults base, const SamplingDefaults& top) {
    over(base.temperature, top.temperature);
    over(base.top_p, top.top_p);
    over(base.min_p, top.min_p);
    over(base.top_k, top.top_k);
    over(base.presence_penalty, top.presence_penalty);
    over(base.frequency_penalty, top.frequency_penalty);
    over(base.repetition_penalty, top.repetition_penalty);
    over(base.seed, top.seed);
    return base;
}

SamplingParams resolve_sampling(const SamplingDefaults& model, const SamplingDefaults& server,
                                const SamplingDefaults& request) {
    const SamplingDefaults d =
        sampling_defaults_over(sampling_defaults_over(sampling_defaults_over(kSamplingFallback, model), server), request);
    SamplingParams p;
    p.temperature = *d.temperature;
    p.top_p = *d.top_p;
    p.min_p = *d.min_p;
    p.top_k = *d.top_k;
    p.presence_penalty = *d.presence_penalty;
    p.frequency_penalty = *d.frequency_penalty;
    p.repetition_penalty = *d.repetition_penalty;
    p.seed = d.seed.value_or(0);
    return p;
}

} // namespace ninfer::core
