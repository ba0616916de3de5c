// ninfer::core - the object plan: physical objects, their bindings and checkpoint sources.
#include "core/convert/plan.h"

#include "core/formats/format.h"
#include "core/util/error.h"

#include <tuple>

namespace ninfer::core {
namespace {

using G = TensorGroup;
using I = SyntheticInit;
using Shape = std::vector<uint64_t>;

uint64_t numel(const Shape& s) {
    uint64_t n = 1;
    for (uint64_t d : s)
        n *= d;
    return n;
}

std::string shape_text(const Shape& s) {
    std::string t = "[";
    for (size_t i = 0; i < s.size(); ++i)
        t += (i ? "," : "") + std::to_string(s[i]);
    return t + "]";
}

class PlanBuilder {
  public:
    PlanBuilder(const ModelConfig& c, const PlanOptions& o) : c_(c), o_(o) {}

    std::vector<PlannedObject> build() {
        const std::string& tp = o_.naming.text_prefix;
        const uint64_t h = c_.hidden_size, v = c_.vocab_size;
        single("text/token_embedding", G::Embedding, {v, h}, I::Matrix, tp + "embed_tokens.weight");
        for (uint32_t l = 0; l < c_.num_hidden_layers; ++l)
            block("text/layers/" + std::to_string(l) + "/", tp + "layers." + std::to_string(l) + ".",
                  c_.layer_types[l], false);
        single("text/final_norm", G::Norm, {h}, I::OffsetNorm, tp + "norm.weight");
        single("text/output_head", G::OutputHead, {v, h}, I::Matrix, o_.naming.output_head_key);
        if (o_.with_mtp)
            mtp();
        if (o_.with_vision)
            vision();
        return std::move(objects_);
    }

  private:
    PlannedObject& add(std::string id, G group, Shape shape, I init) {
        PlannedObject& o = objects_.emplace_back();
        o.id = std::move(id);
        o.group = group;
        o.shape = std::move(shape);
        o.init = init;
        return o;
    }

    static void source(PlannedObject& o, const std::string& key, Shape shape, uint64_t r0, uint64_t r1) {
        o.sources.push_back({key, std::move(shape), r0, r1});
    }
    static void source_all(PlannedObject& o, const std::string& key, Shape shape) {
        uint64_t rows = numel(shape) / o.cols();
        o.sources.push_back({key, std::move(shape), 0, rows});
    }
    static void bind_rows(PlannedObject& o, std::string parameter, uint64_t r0, uint64_t r1) {
        o.bindings.push_back({std::move(parameter), r0 * o.cols(), r1 * o.cols()});
    }

    // One object holding one parameter of the same name, copied whole from one tensor.
    PlannedObject& single(const std::string& id, G group, Shape shape, I init, const std::string& key,
                          Shape key_shape = {}) {
        PlannedObject& o = add(id, group, shape, init);
        source_all(o, key, key_shape.empty() ? shape : key_shape);
        o.bindings.push_back({id, 0, numel(shape)});
        return o;
    }

    // A parent made of several whole tensors stacked by rows, each bound as its own parameter.
    void stacked(const std::string& id, G group, uint64_t cols,
                 const std::vector<std::tuple<std::string, std::string, uint64_t>>& parts) {
        uint64_t rows = 0;
        for (auto& [param, key, n] : parts)
            rows += n;
        PlannedObject& o = add(id, group, {rows, cols}, I::Matrix);
        uint64_t r = 0;
        for (auto& [param, key, n] : parts) {
            source_all(o, key, {n, cols});
            bind_rows(o, param, r, r + n);
            r += n;
        }
    }

    void block(const std::string& p, const std::string& k, LayerKind kind, bool is_mtp) {
        const uint64_t h = c_.hidden_size;
        single(p + "input_norm", G::Norm, {h}, I::OffsetNorm, k + "input_layernorm.weight");
        if (kind == LayerKind::FullAttention)
            attention(p + "attention/", k + "self_attn.", is_mtp);
        else
            gdn(p + "gdn/", k + "linear_attn.");
        single(p + "post_attention_norm", G::Norm, {h}, I::OffsetNorm,
               k + "post_attention_layernorm.weight");
        if (c_.is_moe())
            moe(p + "moe/", k + "mlp.", is_mtp);
        else
            stacked_mlp(p + "mlp/", k + "mlp.", is_mtp);
    }

    void attention(const std::string& p, const std::string& k, bool is_mtp) {
        const uint64_t h = c_.hidden_size, d = c_.head_dim, nq = c_.num_attention_heads,
                       nkv = c_.num_key_value_heads;
        const Shape q_shape = {2 * nq * d, h}, kv_shape = {nkv * d, h};
        // q_proj rows are [query_d | gate_d] per head: split per head, never in halves.
        for (int half = 0; half < 2; ++half) {
            PlannedObject& o = add(p + (half ? "gate_value" : "query_key"),
                                   is_mtp ? G::Mtp : half ? G::AttentionGv : G::AttentionQk,
                                   {(nq + nkv) * d, h}, I::Matrix);
            for (uint64_t head = 0; head < nq; ++head)
                source(o, k + "q_proj.weight", q_shape, head * 2 * d + half * d,
                       head * 2 * d + half * d + d);
            source_all(o, k + (half ? "v_proj.weight" : "k_proj.weight"), kv_shape);
            bind_rows(o, p + (half ? "gate" : "query"), 0, nq * d);
            bind_rows(o, p + (half ? "value" : "key"), nq * d, (nq + nkv) * d);
        }
        single(p + "query_norm", G::Norm, {d}, I::OffsetNorm, k + "q_norm.weight");
        single(p + "key_norm", G::Norm, {d}, I::OffsetNorm, k + "k_norm.weight");
        single(p + "output", is_mtp ? G::Mtp : G::AttentionOutput, {h, nq * d}, I::Matrix,
               k + "o_proj.weight");
    }

    void gdn(const std::string& p, const std::string& k) {
        const uint64_t h = c_.hidden_size, kd = c_.gdn_key_dim(), vd = c_.gdn_value_dim(),
                       nv = c_.linear_num_value_heads, conv = c_.gdn_conv_dim(),
                       taps = c_.linear_conv_kernel_dim;
        const Shape qkv_shape = {conv, h};
        PlannedObject& qk = add(p + "query_key", G::GdnQk, {2 * kd, h}, I::Matrix);
        source(qk, k + "in_proj_qkv.weight", qkv_shape, 0, 2 * kd);
        bind_rows(qk, p + "query", 0, kd);
        bind_rows(qk, p + "key", kd, 2 * kd);
        PlannedObject& vz = add(p + "value_z", G::GdnVz, {2 * vd, h}, I::Matrix);
        source(vz, k + "in_proj_qkv.weight", qkv_shape, 2 * kd, conv);
        source_all(vz, k + "in_proj_z.weight", {vd, h});
        bind_rows(vz, p + "value", 0, vd);
        bind_rows(vz, p + "z", vd, 2 * vd);
        stacked(p + "a_b_projection", G::GdnAb, h,
                {{p + "a_projection", k + "in_proj_a.weight", nv},
                 {p + "b_projection", k + "in_proj_b.weight", nv}});
        single(p + "a_log", G::GdnScalar, {nv}, I::ALog, k + "A_log");
        single(p + "dt_bias", G::GdnScalar, {nv}, I::DtBias, k + "dt_bias");
        single(p + "norm", G::Norm, {c_.linear_value_head_dim}, I::GatedNorm, k + "norm.weight");
        PlannedObject& cv = single(p + "convolution", G::Conv, {taps, conv}, I::Conv,
                                   k + "conv1d.weight", {conv, 1, taps});
        cv.transpose_taps = true;
        single(p + "output", G::GdnOutput, {h, vd}, I::Matrix, k + "out_proj.weight");
    }

    void stacked_mlp(const std::string& p, const std::string& k, bool is_mtp) {
        const uint64_t h = c_.hidden_size, in = c_.intermediate_size;
        stacked(p + "gate_up", is_mtp ? G::Mtp : G::MlpGateUp, h,
                {{p + "gate", k + "gate_proj.weight", in}, {p + "up", k + "up_proj.weight", in}});
        single(p + "down", is_mtp ? G::Mtp : G::MlpDown, {h, in}, I::Matrix, k + "down_proj.weight");
    }

    void moe(const std::string& p, const std::string& k, bool is_mtp) {
        const uint64_t h = c_.hidden_size, e_n = c_.num_experts, in = c_.moe_intermediate_size,
                       sn = c_.shared_expert_intermediate_size;
        stacked(p + "router_shared_score", G::MoeRouter, h,
                {{p + "router", k + "gate.weight", e_n},
                 {p + "shared_score", k + "shared_expert_gate.weight", 1}});
        PlannedObject& gu = add(p + "experts/gate_up", is_mtp ? G::Mtp : G::MoeExpertsGateUp,
                                {e_n * 2 * in, h}, I::Matrix);
        if (o_.naming.fused_experts)
            source_all(gu, k + "experts.gate_up_proj", {e_n, 2 * in, h});
        for (uint64_t e = 0; e < e_n; ++e) {
            std::string ek = k + "experts." + std::to_string(e) + ".";
            std::string ep = p + "experts/" + std::to_string(e) + "/";
            if (!o_.naming.fused_experts) {
                source_all(gu, ek + "gate_proj.weight", {in, h});
                source_all(gu, ek + "up_proj.weight", {in, h});
            }
            bind_rows(gu, ep + "gate", e * 2 * in, e * 2 * in + in);
            bind_rows(gu, ep + "up", e * 2 * in + in, (e + 1) * 2 * in);
        }
        PlannedObject* down_ptr = &add(p + "experts/down", is_mtp ? G::Mtp : G::MoeExpertsDown, {e_n * h, in},
                        I::Matrix);
        if (o_.naming.fused_experts)
            source_all(*down_ptr, k + "experts.down_proj", {e_n, h, in});
        for (uint64_t e = 0; e < e_n; ++e) {
            if (!o_.naming.fused_experts)
                source_all(*down_ptr, k + "experts." + std::to_string(e) + ".down_proj.weight",
                           {h, in});
            bind_rows(*down_ptr, p + "experts/" + std::to_string(e) + "/down", e * h, (e + 1) * h);
        }
        G shared = is_mtp ? G::Mtp : G::MoeShared;
        stacked(p + "shared/gate_up", shared, h,
                {{p + "shared/gate", k + "shared_expert.gate_proj.weight", sn},
                 {p + "shared/up", k + "shared_expert.up_proj.weight", sn}});
        single(p + "shared/down", shared, {h, sn}, I::Matrix, k + "shared_expert.down_proj.weight");
    }

    void mtp() {
        const uint64_t h = c_.hidden_size;
        single("mtp/input_projection", G::Mtp, {h, 2 * h}, I::Matrix, "mtp.fc.weight");
        single("mtp/embedding_norm", G::Norm, {h}, I::OffsetNorm, "mtp.pre_fc_norm_embedding.weight");
        single("mtp/hidden_norm", G::Norm, {h}, I::OffsetNorm, "mtp.pre_fc_norm_hidden.weight");
        block("mtp/layers/0/", "mtp.layers.0.", LayerKind::FullAttention, true);
        single("mtp/final_norm", G::Norm, {h}, I::OffsetNorm, "mtp.norm.weight");
    }

    void vision() {
        const VisionConfig& vc = o_.vision;
        const std::string& k = o_.naming.vision_prefix;
        const uint64_t vh = vc.hidden_size, ps = vc.patch_size,
                       patch_in = uint64_t(vc.in_channels) * vc.temporal_patch_size * ps * ps;
        single("vision/patch_embedding", G::VisionPatch, {vh, patch_in}, I::Matrix,
               k + "patch_embed.proj.weight", {vh, vc.in_channels, vc.temporal_patch_size, ps, ps});
        single("vision/patch_embedding_bias", G::Bias, {vh}, I::Bias, k + "patch_embed.proj.bias");
        single("vision/position_embedding", G::Bias, {vc.num_position_embeddings, vh}, I::Matrix,
               k + "pos_embed.weight");
        for (uint32_t b = 0; b < vc.depth; ++b) {
            std::string p = "vision/layers/" + std::to_string(b) + "/", bk = k + "blocks." + std::to_string(b) + ".";
            const char* names[] = {"query", "key", "value"};
            PlannedObject& qkv = add(p + "attention/qkv", G::VisionAttention, {3 * vh, vh}, I::Matrix);
            source_all(qkv, bk + "attn.qkv.weight", {3 * vh, vh});
            for (uint64_t i = 0; i < 3; ++i)
                bind_rows(qkv, p + "attention/" + names[i], i * vh, (i + 1) * vh);
            // The bias splits by elements: [query | key | value], vh each.
            PlannedObject& qkv_bias = add(p + "attention/qkv_bias", G::Bias, {3 * vh}, I::Bias);
            source_all(qkv_bias, bk + "attn.qkv.bias", {3 * vh});
            for (uint64_t i = 0; i < 3; ++i)
                qkv_bias.bindings.push_back({p + "attention/" + names[i] + "_bias", i * vh, (i + 1) * vh});
            single(p + "attention/output", G::VisionAttention, {vh, vh}, I::Matrix, bk + "attn.proj.weight");
            single(p + "attention/output_bias", G::Bias, {vh}, I::Bias, bk + "attn.proj.bias");
            single(p + "mlp/fc1", G::VisionMlp, {vc.intermediate_size, vh}, I::Matrix, bk + "mlp.linear_fc1.weight");
            single(p + "mlp/fc1_bias", G::Bias, {vc.intermediate_size}, I::Bias, bk + "mlp.linear_fc1.bias");
            single(p + "mlp/fc2", G::VisionMlp, {vh, vc.intermediate_size}, I::Matrix, bk + "mlp.linear_fc2.weight");
            single(p + "mlp/fc2_bias", G::Bias, {vh}, I::Bias, bk + "mlp.linear_fc2.bias");
            for (const char* n : {"norm1", "norm2"}) {
                single(p + n + "_weight", G::Norm, {vh}, I::LayerNorm, bk + n + ".weight");
                single(p + n + "_bias", G::Bias, {vh}, I::Bias, bk + n + ".bias");
            }
        }
        const uint64_t merged = vh * vc.spatial_merge_size * vc.spatial_merge_size;
        single("vision/merger/norm_weight", G::Norm, {vh}, I::LayerNorm, k + "merger.norm.weight");
        single("vision/merger/norm_bias", G::Bias, {vh}, I::Bias, k + "merger.norm.bias");
        single("vision/merger/fc1", G::VisionMerger, {merged, merged}, I::Matrix, k + "merger.linear_fc1.weight");
        single("vision/merger/fc1_bias", G::Bias, {merged}, I::Bias, k + "merger.linear_fc1.bias");
        single("vision/merger/fc2", G::VisionMerger, {vc.out_hidden_size, merged}, I::Matrix,
               k + "merger.linear_fc2.weight");
        single("vision/merger/fc2_bias", G::Bias, {vc.out_hidden_size}, I::Bias, k + "merger.linear_fc2.bias");
    }

    const ModelConfig& c_;
    const PlanOptions& o_;
    std::vector<PlannedObject> objects_;
};

} // namespace

uint64_t PlannedObject::rows() const { return numel(shape) / cols(); }

std::vector<PlannedObject> plan_objects(const ModelConfig& config, const PlanOptions& options) {
    config.validate();
    if (options.with_vision && (options.vision.hidden_size == 0 || options.vision.depth == 0 ||
                                options.vision.patch_size == 0 || options.vision.out_hidden_size == 0))
        throw Error("convert: the vision config lacks depth, hidden_size, patch_size or out_hidden_size");
    return PlanBuilder(config, options).build();
}

void check_plan_formats(const std::vector<PlannedObject>& plan, const Recipe& recipe) {
    for (const PlannedObject& o : plan) {
        TensorFormat f = recipe.format(o.group);
        if (format_is_quantized(f) && o.shape.size() != 2)
            throw Error("convert: group " + std::string(tensor_group_name(o.group)) + " object " + o.id +
                        " has shape " + shape_text(o.shape) + "; " + std::string(format_name(f)) +
                        " needs a matrix");
        if (f == TensorFormat::Nvfp4 && (o.shape[0] % 128 != 0 || o.shape[1] % 64 != 0))
            throw Error("convert: nvfp4 needs rows % 128 == 0 and columns % 64 == 0, but object " +
                        o.id + " (group " + std::string(tensor_group_name(o.group)) + ") is " +
                        shape_text(o.shape) + "; choose another format for that group");
    }
}

uint64_t plan_encoded_bytes(const std::vector<PlannedObject>& plan, const Recipe& recipe) {
    uint64_t total = 0;
    for (const PlannedObject& o : plan)
        total += encoded_size(recipe.format(o.group), o.shape);
    return total;
}

} // namespace ninfer::core
