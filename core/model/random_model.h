// ninfer::core - an in-memory model with random weights, for tests and benchmarks that must run
// without an artifact (and before the converter exists).
//
// Contract:
// - InMemoryModel owns encoded tensors (codec.h `encode`) and the logical bindings over them; the
//   bindings stay valid while the model lives (it is neither copyable nor movable).
// - random(config, options) draws every parameter of text_parameter_specs(config) (then of
//   mtp_parameter_specs with options.with_mtp, so the text weights do not depend on it) from a seeded
//   generator with scales that keep activations O(1) (offset-norm weights near 0, gated-norm
//   weights near 1, A_log = log U(1,16), conv taps and dt_bias perturbed) and encodes matrices in
//   options.matrix_format (vectors and norms in fp32). With options.fuse, the projections that the
//   official recipes fuse (attention q/k/gate/v, GDN q/k/v/z, MLP gate/up) share one stored parent
//   and bind through row pieces, so the binder's piece handling is exercised.
// - weights() binds them with ModelWeights::from_bindings.
#pragma once

#include "core/formats/tensor.h"
#include "core/model/config.h"
#include "core/model/weights.h"

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace ninfer::core {

struct RandomModelOptions {
    uint64_t seed = 1;
    TensorFormat matrix_format = TensorFormat::Bf16;
    bool fuse = false;
    float output_head_scale = 4.0f; // spreads the logits so greedy choices are far from ties
    bool with_mtp = false;          // also the MTP head (mtp_parameter_specs), drawn after the text
};

class InMemoryModel {
  public:
    InMemoryModel() = default;
    InMemoryModel(const InMemoryModel&) = delete;
    InMemoryModel& operator=(const InMemoryModel&) = delete;

    static std::unique_ptr<InMemoryModel> random(const ModelConfig& config,
                                                 const RandomModelOptions& options = {});

    // Adds one stored tensor holding `values` (C order) and returns it.
    const StoredTensor& add_tensor(const std::string& id, TensorFormat format,
                                   std::vector<uint64_t> shape, std::span<const float> values);
    // Binds a logical parameter to whole rows [row_begin, row_begin + rows) of a stored tensor.
    void bind_rows(const std::string& name, const StoredTensor& t, uint64_t row_begin,
                   std::vector<uint64_t> logical_shape);

    const std::map<std::string, WeightBinding>& bindings() const { return bindings_; }
    const ModelConfig& config() const { return config_; }
    ModelWeights weights() const { return ModelWeights::from_bindings(config_, bindings_); }

  private:
    ModelConfig config_;
    std::deque<std::vector<uint8_t>> storage_;
    std::deque<StoredTensor> tensors_;
    std::map<std::string, WeightBinding> bindings_;
};

} // namespace ninfer::core
