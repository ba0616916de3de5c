// ninfer::core - random in-memory models encoded with the codecs (tests, benchmarks).
#include "core/model/random_model.h"

#include "core/formats/codec.h"
#include "core/util/error.h"

#include <cmath>
#include <random>
#include <set>

namespace ninfer::core {
namespace {

bool ends_with(const std::string& s, std::string_view tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

uint64_t element_count(const std::vector<uint64_t>& shape) {
    uint64_t n = 1;
    for (uint64_t d : shape)
        n *= d;
    return n;
}

std::vector<float> draw(const ParameterSpec& spec, std::mt19937_64& rng, float head_scale) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> uniform(1.0f, 16.0f);
    std::vector<float> v(element_count(spec.shape));
    const std::string& n = spec.name;
    const float fan_in = spec.shape.size() == 2 ? float(spec.shape[1]) : 1.0f;
    for (float& x : v) {
        if (ends_with(n, "gdn/norm"))
            x = 1.0f + 0.1f * normal(rng); // plain gated-norm weight
        else if (ends_with(n, "norm"))
            x = 0.1f * normal(rng); // offset RMSNorm weight: scale 1 + w
        else if (ends_with(n, "a_log"))
            x = std::log(uniform(rng));
        else if (ends_with(n, "dt_bias"))
            x = 1.0f + 0.1f * normal(rng);
        else if (ends_with(n, "convolution"))
            x = 0.5f * normal(rng);
        else if (n == "text/token_embedding")
            x = normal(rng);
        else if (n == "text/output_head")
            x = head_scale * normal(rng) / std::sqrt(fan_in);
        else
            x = normal(rng) / std::sqrt(fan_in);
    }
    return v;
}

// Groups of projections that official recipes store in one parent (rows concatenated).
const std::vector<std::vector<std::string>> kFusedGroups = {
    {"attention/query", "attention/key", "attention/gate", "attention/value"},
    {"gdn/query", "gdn/key", "gdn/value", "gdn/z"},
    {"mlp/gate", "mlp/up"},
};

} // namespace

const StoredTensor& InMemoryModel::add_tensor(const std::string& id, TensorFormat format,
                                              std::vector<uint64_t> shape,
                                              std::span<const float> values) {
    storage_.push_back(encode(format, shape, values));
    StoredTensor t;
    t.id = id;
    t.format = format;
    t.shape = std::move(shape);
    t.data = storage_.back().data();
    t.bytes = storage_.back().size();
    tensors_.push_back(std::move(t));
    return tensors_.back();
}

void InMemoryModel::bind_rows(const std::string& name, const StoredTensor& t, uint64_t row_begin,
                              std::vector<uint64_t> logical_shape) {
    const uint64_t cols = t.shape.empty() ? 1 : t.shape.back();
    const uint64_t n = element_count(logical_shape);
    WeightBinding b;
    b.name = name;
    b.shape = std::move(logical_shape);
    b.pieces.push_back({&t, row_begin * cols, row_begin * cols + n});
    bindings_[name] = std::move(b);
}

std::unique_ptr<InMemoryModel> InMemoryModel::random(const ModelConfig& config,
                                                     const RandomModelOptions& options) {
    config.validate();
    auto model = std::make_unique<InMemoryModel>();
    model->config_ = config;
    std::mt19937_64 rng(options.seed);
    std::map<std::string, std::pair<ParameterSpec, std::vector<float>>> values;
    std::vector<ParameterSpec> specs = text_parameter_specs(config);
    if (options.with_mtp)
        for (ParameterSpec& s : mtp_parameter_specs(config))
            specs.push_back(std::move(s));
    for (const ParameterSpec& s : specs)
        values[s.name] = {s, draw(s, rng, options.output_head_scale)};

    std::set<std::string> done;
    if (options.fuse) {
        for (uint32_t l = 0; l < config.num_hidden_layers; ++l) {
            const std::string prefix = "text/layers/" + std::to_string(l) + "/";
            for (const auto& group : kFusedGroups) {
                if (!values.count(prefix + group[0]))
                    continue;
                std::vector<float> rows;
                uint64_t n_rows = 0, cols = 0;
                for (const std::string& member : group) {
                    const auto& [spec, v] = values.at(prefix + member);
                    rows.insert(rows.end(), v.begin(), v.end());
                    n_rows += spec.shape[0];
                    cols = spec.shape[1];
                }
                const StoredTensor& parent = model->add_tensor(
                    prefix + group[0] + "+fused", options.matrix_format, {n_rows, cols}, rows);
                uint64_t at = 0;
                for (const std::string& member : group) {
                    const ParameterSpec& spec = values.at(prefix + member).first;
                    model->bind_rows(spec.name, parent, at, spec.shape);
                    at += spec.shape[0];
                    done.insert(spec.name);
                }
            }
        }
    }
    for (const ParameterSpec& s : specs) {
        if (done.count(s.name))
            continue;
        const bool is_matrix = s.shape.size() == 2 && !ends_with(s.name, "convolution");
        const TensorFormat f = is_matrix ? options.matrix_format : TensorFormat::Fp32;
        const StoredTensor& t = model->add_tensor(s.name, f, s.shape, values.at(s.name).second);
        model->bind_rows(s.name, t, 0, s.shape);
    }
    return model;
}

} // namespace ninfer::core
