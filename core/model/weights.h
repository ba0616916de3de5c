// ninfer::core - the text model's weights, bound by logical name and shape-checked.
//
// Contract:
// - ModelWeights::bind(config, lookup) resolves every logical parameter the config implies
//   (docs/ARTIFACT_FORMAT.md §4.3 names: text/token_embedding, text/layers/{l}/attention/query,
//   ...) through `lookup`, checks its logical shape against the config and checks that its pieces
//   cover it exactly in whole rows. A missing or misshapen parameter throws
//   ninfer::Error("weights: NAME ..."). Nothing is decoded except the small vectors (norms, A_log,
//   dt_bias, the conv taps), which are copied to f32 once.
// - from_artifact binds from an Artifact's bindings (config from its `text` component); the
//   Artifact must outlive the weights. The MTP head (mtp/..., docs/MODEL.md §8) is bound when the
//   lookup has `mtp/input_projection` (then every MTP parameter must be there); `mtp` stays empty
//   otherwise.
//   The vision tower (core/model/vision_weights.h) is bound when the artifact has a `vision`
//   component and `vision/patch_embedding` (an out_hidden_size the stored config lacks, as in
//   upgraded artifacts, is read from vision/merger/fc2's rows); `vision` stays null otherwise.
//   stored_bytes() counts the text model and MTP head only (the tower runs from the mapping).
//   from_bindings binds from any name -> WeightBinding map (tests
//   build one in memory, see random_model.h).
// - Matrix is a logical [rows, cols] parameter made of row segments of stored tensors; its rows
//   are decoded on the fly (dot / decode) so weights stay in their stored format.
// Thread safety: immutable after bind; any thread may read.
#pragma once

#include "core/formats/tensor.h"
#include "core/model/config.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer::core {

class Artifact;
struct VisionWeights;

// A logical matrix [rows, cols]: consecutive row segments, each a row range of one stored tensor.
class Matrix {
  public:
    struct Segment {
        const StoredTensor* tensor = nullptr;
        uint64_t tensor_row = 0;  // first row inside the stored tensor
        uint64_t logical_row = 0; // first logical row it provides
        uint64_t n_rows = 0;
    };

    uint64_t rows() const { return rows_; }
    uint64_t cols() const { return cols_; }
    const std::vector<Segment>& segments() const { return segments_; }
    uint64_t stored_bytes() const; // bytes of the encoded rows it uses

    // y[r] = row(row_begin + r) . x for r < n_rows, without materialising the rows.
    void dot(uint64_t row_begin, uint64_t n_rows, const float* x, float* y) const;
    // Decodes n_rows rows into out (n_rows * cols floats).
    void decode(uint64_t row_begin, uint64_t n_rows, float* out) const;

    static Matrix from_binding(const WeightBinding& b, uint64_t rows, uint64_t cols);

  private:
    template <class Fn> void for_rows(uint64_t row_begin, uint64_t n_rows, Fn&& fn) const;
    uint64_t rows_ = 0, cols_ = 0;
    std::vector<Segment> segments_;
};

struct AttentionWeights {
    Matrix query, key, gate, value, output;
    std::vector<float> query_norm, key_norm; // offset RMSNorm weights [head_dim]
};

struct GdnWeights {
    Matrix query, key, value, z, a_projection, b_projection, output;
    std::vector<float> a_log, dt_bias; // [Hv]
    std::vector<float> norm;           // gated RMSNorm weight [Dv] (plain, not offset)
    std::vector<float> convolution;    // tap-major [kernel, conv_dim]
};

struct MlpWeights {
    Matrix gate, up, down;
};

struct MoeWeights {
    Matrix router;       // [E, H]
    Matrix shared_score; // [1, H]
    std::vector<MlpWeights> experts;
    MlpWeights shared;
};

struct LayerWeights {
    LayerKind kind = LayerKind::LinearAttention;
    std::vector<float> input_norm, post_attention_norm; // offset RMSNorm weights [H]
    AttentionWeights attention;                         // full-attention layers
    GdnWeights gdn;                                     // linear-attention layers
    MlpWeights mlp;                                     // dense models
    MoeWeights moe;                                     // MoE models
};

// The MTP head (docs/MODEL.md §8): e = norm(embed(x_{t+1})), h = norm(h_t),
// u = input_projection([e, h]), one full-attention decoder layer (the main layers' FFN kind), final
// norm, the main output head.
struct MtpWeights {
    Matrix input_projection;              // [H, 2H], the embedding half first
    std::vector<float> embedding_norm;    // offset RMSNorm weights [H]
    std::vector<float> hidden_norm;
    std::vector<float> final_norm;
    LayerWeights layer;                   // kind FullAttention
};

using BindingLookup = std::function<const WeightBinding*(std::string_view name)>;

class ModelWeights {
  public:
    ModelConfig config;
    Matrix token_embedding; // [V, H]
    Matrix output_head;     // [V, H]
    std::vector<float> final_norm;
    std::vector<LayerWeights> layers;
    std::optional<MtpWeights> mtp;
    std::shared_ptr<const VisionWeights> vision; // the tower (vision_weights.h), when present

    static ModelWeights bind(const ModelConfig& config, const BindingLookup& lookup);
    static ModelWeights from_artifact(const Artifact& artifact);
    static ModelWeights from_bindings(const ModelConfig& config,
                                      const std::map<std::string, WeightBinding>& bindings);

    uint64_t stored_bytes() const; // encoded bytes of every bound parameter
};

// Every logical parameter the config implies with its logical shape, in binding order (for
// converters, in-memory test models and the memory planner).
struct ParameterSpec {
    std::string name;
    std::vector<uint64_t> shape;
};
std::vector<ParameterSpec> text_parameter_specs(const ModelConfig& config);
std::vector<ParameterSpec> mtp_parameter_specs(const ModelConfig& config);

} // namespace ninfer::core
