// ninfer::core - bind the text model's logical parameters and check their shapes.
#include "core/model/weights.h"

#include "core/model/vision_weights.h"
#include "core/model/weight_binder.h"

#include "core/artifact/artifact.h"
#include "core/formats/codec.h"
#include "core/formats/format.h"
#include "core/util/error.h"

#include <algorithm>

namespace ninfer::core {
namespace {

[[noreturn]] void fail(const std::string& name, const std::string& why) {
    throw Error("weights: " + name + ": " + why);
}

std::string shape_text(const std::vector<uint64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i)
        s += (i ? "," : "") + std::to_string(shape[i]);
    return s + "]";
}

uint64_t tensor_row_bytes(const StoredTensor& t) {
    const uint64_t rows = tensor_rows(t);
    return rows ? t.bytes / rows : 0;
}

void check_shape(const WeightBinding& b, const std::vector<uint64_t>& want) {
    if (b.shape != want)
        fail(b.name, "shape " + shape_text(b.shape) + ", the config needs " + shape_text(want));
}

// Every element of a parameter, in logical C order.
std::vector<float> decode_all(const WeightBinding& b) {
    uint64_t n = 1;
    for (uint64_t d : b.shape)
        n *= d;
    std::vector<float> out(n);
    uint64_t at = 0;
    for (const WeightPiece& p : b.pieces) {
        const uint64_t len = p.elem_end - p.elem_begin;
        if (at + len > n)
            fail(b.name, "pieces cover more than the parameter");
        if (format_is_direct(p.tensor->format)) {
            decode_elements(*p.tensor, p.elem_begin, p.elem_end, out.data() + at);
        } else {
            const uint64_t cols = tensor_cols(*p.tensor);
            if (p.elem_begin % cols || len % cols)
                fail(b.name, "a quantized piece does not cover whole rows");
            decode_rows(*p.tensor, p.elem_begin / cols, len / cols, out.data() + at);
        }
        at += len;
    }
    if (at != n)
        fail(b.name, "pieces cover " + std::to_string(at) + " of " + std::to_string(n) + " elements");
    return out;
}

} // namespace

const WeightBinding& WeightBinder::get(const std::string& name) {
    const WeightBinding* b = lookup_(name);
    if (!b)
        throw Error("weights: missing parameter " + name);
    return *b;
}

Matrix WeightBinder::matrix(const std::string& name, uint64_t rows, uint64_t cols) {
    const WeightBinding& b = get(name);
    check_shape(b, {rows, cols});
    return Matrix::from_binding(b, rows, cols);
}

std::vector<float> WeightBinder::vector(const std::string& name, std::vector<uint64_t> shape) {
    const WeightBinding& b = get(name);
    check_shape(b, shape);
    return decode_all(b);
}

namespace {

MlpWeights bind_mlp(WeightBinder& b, const std::string& prefix, uint64_t hidden, uint64_t inter) {
    return {b.matrix(prefix + "/gate", inter, hidden), b.matrix(prefix + "/up", inter, hidden),
            b.matrix(prefix + "/down", hidden, inter)};
}

} // namespace

uint64_t Matrix::stored_bytes() const {
    uint64_t total = 0;
    for (const Segment& s : segments_)
        total += s.n_rows * tensor_row_bytes(*s.tensor);
    return total;
}

template <class Fn> void Matrix::for_rows(uint64_t row_begin, uint64_t n_rows, Fn&& fn) const {
    const uint64_t row_end = row_begin + n_rows;
    if (row_end > rows_)
        throw Error("weights: row range past the end of a matrix");
    for (const Segment& s : segments_) {
        const uint64_t lo = std::max(row_begin, s.logical_row);
        const uint64_t hi = std::min(row_end, s.logical_row + s.n_rows);
        if (lo < hi)
            fn(*s.tensor, s.tensor_row + (lo - s.logical_row), hi - lo, lo - row_begin);
    }
}

void Matrix::dot(uint64_t row_begin, uint64_t n_rows, const float* x, float* y) const {
    for_rows(row_begin, n_rows, [&](const StoredTensor& t, uint64_t trow, uint64_t n, uint64_t at) {
        dot_rows(t, trow, n, x, y + at);
    });
}

void Matrix::decode(uint64_t row_begin, uint64_t n_rows, float* out) const {
    for_rows(row_begin, n_rows, [&](const StoredTensor& t, uint64_t trow, uint64_t n, uint64_t at) {
        decode_rows(t, trow, n, out + at * cols_);
    });
}

Matrix Matrix::from_binding(const WeightBinding& b, uint64_t rows, uint64_t cols) {
    Matrix m;
    m.rows_ = rows;
    m.cols_ = cols;
    uint64_t at = 0;
    for (const WeightPiece& p : b.pieces) {
        if (!p.tensor)
            fail(b.name, "piece without a tensor");
        if (tensor_cols(*p.tensor) != cols)
            fail(b.name, "stored tensor " + p.tensor->id + " has rows of " +
                             std::to_string(tensor_cols(*p.tensor)) + " values, need " +
                             std::to_string(cols));
        const uint64_t len = p.elem_end - p.elem_begin;
        if (p.elem_begin % cols || len % cols || p.elem_end < p.elem_begin)
            fail(b.name, "a piece does not cover whole rows");
        m.segments_.push_back({p.tensor, p.elem_begin / cols, at, len / cols});
        at += len / cols;
    }
    if (at != rows)
        fail(b.name, "pieces cover " + std::to_string(at) + " of " + std::to_string(rows) + " rows");
    return m;
}

namespace {

// One decoder layer's parameters under prefix p ("text/layers/N/" or "mtp/layers/0/").
void add_layer_specs(const ModelConfig& c, const std::string& p, LayerKind kind,
                     std::vector<ParameterSpec>& out) {
    const uint64_t H = c.hidden_size;
    auto add = [&](std::string name, std::vector<uint64_t> shape) {
        out.push_back({std::move(name), std::move(shape)});
    };
    auto add_mlp = [&](const std::string& prefix, uint64_t inter) {
        add(prefix + "/gate", {inter, H});
        add(prefix + "/up", {inter, H});
        add(prefix + "/down", {H, inter});
    };
    add(p + "input_norm", {H});
    add(p + "post_attention_norm", {H});
    if (kind == LayerKind::FullAttention) {
        add(p + "attention/query", {c.attn_q_dim(), H});
        add(p + "attention/key", {c.attn_kv_dim(), H});
        add(p + "attention/gate", {c.attn_q_dim(), H});
        add(p + "attention/value", {c.attn_kv_dim(), H});
        add(p + "attention/query_norm", {c.head_dim});
        add(p + "attention/key_norm", {c.head_dim});
        add(p + "attention/output", {H, c.attn_q_dim()});
    } else {
        const uint64_t hv = c.linear_num_value_heads;
        add(p + "gdn/query", {c.gdn_key_dim(), H});
        add(p + "gdn/key", {c.gdn_key_dim(), H});
        add(p + "gdn/value", {c.gdn_value_dim(), H});
        add(p + "gdn/z", {c.gdn_value_dim(), H});
        add(p + "gdn/a_projection", {hv, H});
        add(p + "gdn/b_projection", {hv, H});
        add(p + "gdn/a_log", {hv});
        add(p + "gdn/dt_bias", {hv});
        add(p + "gdn/norm", {c.linear_value_head_dim});
        add(p + "gdn/convolution", {c.linear_conv_kernel_dim, c.gdn_conv_dim()});
        add(p + "gdn/output", {H, c.gdn_value_dim()});
    }
    if (c.is_moe()) {
        add(p + "moe/router", {c.num_experts, H});
        add(p + "moe/shared_score", {1, H});
        for (uint32_t e = 0; e < c.num_experts; ++e)
            add_mlp(p + "moe/experts/" + std::to_string(e), c.moe_intermediate_size);
        add_mlp(p + "moe/shared", c.shared_expert_intermediate_size);
    } else {
        add_mlp(p + "mlp", c.intermediate_size);
    }
}

LayerWeights bind_layer(WeightBinder& b, const ModelConfig& c, const std::string& p, LayerKind kind) {
    const uint64_t H = c.hidden_size;
    LayerWeights L;
    L.kind = kind;
    L.input_norm = b.vector(p + "input_norm", {H});
    L.post_attention_norm = b.vector(p + "post_attention_norm", {H});
    if (L.kind == LayerKind::FullAttention) {
        AttentionWeights& a = L.attention;
        a.query = b.matrix(p + "attention/query", c.attn_q_dim(), H);
        a.key = b.matrix(p + "attention/key", c.attn_kv_dim(), H);
        a.gate = b.matrix(p + "attention/gate", c.attn_q_dim(), H);
        a.value = b.matrix(p + "attention/value", c.attn_kv_dim(), H);
        a.query_norm = b.vector(p + "attention/query_norm", {c.head_dim});
        a.key_norm = b.vector(p + "attention/key_norm", {c.head_dim});
        a.output = b.matrix(p + "attention/output", H, c.attn_q_dim());
    } else {
        GdnWeights& g = L.gdn;
        const uint64_t hv = c.linear_num_value_heads;
        g.query = b.matrix(p + "gdn/query", c.gdn_key_dim(), H);
        g.key = b.matrix(p + "gdn/key", c.gdn_key_dim(), H);
        g.value = b.matrix(p + "gdn/value", c.gdn_value_dim(), H);
        g.z = b.matrix(p + "gdn/z", c.gdn_value_dim(), H);
        g.a_projection = b.matrix(p + "gdn/a_projection", hv, H);
        g.b_projection = b.matrix(p + "gdn/b_projection", hv, H);
        g.a_log = b.vector(p + "gdn/a_log", {hv});
        g.dt_bias = b.vector(p + "gdn/dt_bias", {hv});
        g.norm = b.vector(p + "gdn/norm", {c.linear_value_head_dim});
        g.convolution = b.vector(p + "gdn/convolution", {c.linear_conv_kernel_dim, c.gdn_conv_dim()});
        g.output = b.matrix(p + "gdn/output", H, c.gdn_value_dim());
    }
    if (c.is_moe()) {
        MoeWeights& m = L.moe;
        m.router = b.matrix(p + "moe/router", c.num_experts, H);
        m.shared_score = b.matrix(p + "moe/shared_score", 1, H);
        for (uint32_t e = 0; e < c.num_experts; ++e)
            m.experts.push_back(bind_mlp(b, p + "moe/experts/" + std::to_string(e), H, c.moe_intermediate_size));
        m.shared = bind_mlp(b, p + "moe/shared", H, c.shared_expert_intermediate_size);
    } else {
        L.mlp = bind_mlp(b, p + "mlp", H, c.intermediate_size);
    }
    return L;
}

uint64_t layer_stored_bytes(const LayerWeights& L) {
    auto mlp_bytes = [](const MlpWeights& m) {
        return m.gate.stored_bytes() + m.up.stored_bytes() + m.down.stored_bytes();
    };
    uint64_t total = 0;
    if (L.kind == LayerKind::FullAttention) {
        const AttentionWeights& a = L.attention;
        total += a.query.stored_bytes() + a.key.stored_bytes() + a.gate.stored_bytes() +
                 a.value.stored_bytes() + a.output.stored_bytes();
    } else {
        const GdnWeights& g = L.gdn;
        total += g.query.stored_bytes() + g.key.stored_bytes() + g.value.stored_bytes() +
                 g.z.stored_bytes() + g.a_projection.stored_bytes() + g.b_projection.stored_bytes() +
                 g.output.stored_bytes();
    }
    total += mlp_bytes(L.mlp) + L.moe.router.stored_bytes() + L.moe.shared_score.stored_bytes();
    for (const MlpWeights& e : L.moe.experts)
        total += mlp_bytes(e);
    return total + mlp_bytes(L.moe.shared);
}

} // namespace

std::vector<ParameterSpec> text_parameter_specs(const ModelConfig& c) {
    const uint64_t H = c.hidden_size, V = c.vocab_size;
    std::vector<ParameterSpec> out;
    out.push_back({"text/token_embedding", {V, H}});
    out.push_back({"text/output_head", {V, H}});
    out.push_back({"text/final_norm", {H}});
    for (uint32_t l = 0; l < c.num_hidden_layers; ++l)
        add_layer_specs(c, "text/layers/" + std::to_string(l) + "/", c.layer_types[l], out);
    return out;
}

std::vector<ParameterSpec> mtp_parameter_specs(const ModelConfig& c) {
    const uint64_t H = c.hidden_size;
    std::vector<ParameterSpec> out;
    out.push_back({"mtp/input_projection", {H, 2 * H}});
    out.push_back({"mtp/embedding_norm", {H}});
    out.push_back({"mtp/hidden_norm", {H}});
    add_layer_specs(c, "mtp/layers/0/", LayerKind::FullAttention, out);
    out.push_back({"mtp/final_norm", {H}});
    return out;
}

ModelWeights ModelWeights::bind(const ModelConfig& c, const BindingLookup& lookup) {
    c.validate();
    WeightBinder b(lookup);
    const uint64_t H = c.hidden_size;
    ModelWeights w;
    w.config = c;
    w.token_embedding = b.matrix("text/token_embedding", c.vocab_size, H);
    w.output_head = b.matrix("text/output_head", c.vocab_size, H);
    w.final_norm = b.vector("text/final_norm", {H});
    w.layers.reserve(c.num_hidden_layers);
    for (uint32_t l = 0; l < c.num_hidden_layers; ++l)
        w.layers.push_back(bind_layer(b, c, "text/layers/" + std::to_string(l) + "/", c.layer_types[l]));
    if (lookup("mtp/input_projection")) {
        MtpWeights& m = w.mtp.emplace();
        m.input_projection = b.matrix("mtp/input_projection", H, 2 * H);
        m.embedding_norm = b.vector("mtp/embedding_norm", {H});
        m.hidden_norm = b.vector("mtp/hidden_norm", {H});
        m.layer = bind_layer(b, c, "mtp/layers/0/", LayerKind::FullAttention);
        m.final_norm = b.vector("mtp/final_norm", {H});
    }
    return w;
}

ModelWeights ModelWeights::from_bindings(const ModelConfig& config,
                                         const std::map<std::string, WeightBinding>& bindings) {
    return bind(config, [&](std::string_view name) -> const WeightBinding* {
        auto it = bindings.find(std::string(name));
        return it == bindings.end() ? nullptr : &it->second;
    });
}

ModelWeights ModelWeights::from_artifact(const Artifact& artifact) {
    const ModelConfig config = ModelConfig::from_json(artifact.component("text").config_json);
    const BindingLookup lookup = [&](std::string_view name) -> const WeightBinding* {
        return artifact.has_binding(name) ? &artifact.binding(name) : nullptr;
    };
    ModelWeights w = bind(config, lookup);
    if (artifact.has_component("vision") && lookup("vision/patch_embedding")) {
        VisionConfig vc = VisionConfig::parse(artifact.component("vision").config_json);
        const WeightBinding* fc2 = lookup("vision/merger/fc2");
        if (vc.out_hidden_size == 0 && fc2 && !fc2->shape.empty())
            vc.out_hidden_size = uint32_t(fc2->shape[0]);
        w.vision = std::make_shared<const VisionWeights>(VisionWeights::bind(vc, lookup));
    }
    return w;
}

uint64_t ModelWeights::stored_bytes() const {
    uint64_t total = token_embedding.stored_bytes() + output_head.stored_bytes();
    for (const LayerWeights& L : layers)
        total += layer_stored_bytes(L);
    if (mtp)
        total += mtp->input_projection.stored_bytes() + layer_stored_bytes(mtp->layer);
    return total;
}

} // namespace ninfer::core
