// ninfer tests - HF checkpoint -> artifact: both key layouts, shards, MoE fused vs per-expert,
// MTP and vision, every logical parameter checked against the source tensors it must come from.
#include "hf_fixture.h"

#include "core/convert/convert.h"
#include "core/model/config.h"

#include <catch2/catch.hpp>

using namespace ninfer;
using namespace ninfer::test;
using F = Fixture;

namespace {

std::vector<float> rows(const std::vector<float>& v, uint64_t cols, uint64_t r0, uint64_t r1) {
    return {v.begin() + long(r0 * cols), v.begin() + long(r1 * cols)};
}

std::vector<float> cat(std::vector<float> a, const std::vector<float>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// Query or gate rows of a per-head interleaved q_proj [heads * 2D, H].
std::vector<float> q_half(const std::vector<float>& q, int half) {
    std::vector<float> out;
    for (uint64_t h = 0; h < F::NQ; ++h)
        out = cat(out, rows(q, F::H, h * 2 * F::D + half * F::D, h * 2 * F::D + half * F::D + F::D));
    return out;
}

using core::ComponentChoice;

std::unique_ptr<core::Artifact> convert(const Fixture& f, const std::string& out, const std::string& recipe,
                                        ComponentChoice mtp = ComponentChoice::Auto,
                                        ComponentChoice vision = ComponentChoice::Auto) {
    core::ConvertRequest r;
    r.src_dir = f.dir;
    r.out_path = out;
    r.recipe = core::Recipe::parse(recipe);
    r.mtp = mtp;
    r.vision = vision;
    r.force = true;
    core::convert_checkpoint(r);
    return core::Artifact::open(out);
}

void check_attention(const core::Artifact& a, const Fixture& f, const std::string& p, const std::string& k) {
    const std::vector<float>& q = f.at(k + "self_attn.q_proj.weight");
    CHECK(decode_parameter(a, p + "attention/query") == q_half(q, 0));
    CHECK(decode_parameter(a, p + "attention/gate") == q_half(q, 1));
    CHECK(decode_parameter(a, p + "attention/key") == f.at(k + "self_attn.k_proj.weight"));
    CHECK(decode_parameter(a, p + "attention/value") == f.at(k + "self_attn.v_proj.weight"));
    CHECK(decode_parameter(a, p + "attention/query_norm") == f.at(k + "self_attn.q_norm.weight"));
    CHECK(decode_parameter(a, p + "attention/key_norm") == f.at(k + "self_attn.k_norm.weight"));
    CHECK(decode_parameter(a, p + "attention/output") == f.at(k + "self_attn.o_proj.weight"));
}

void check_ffn(const core::Artifact& a, const Fixture& f, const std::string& p, const std::string& k) {
    CHECK(decode_parameter(a, p + "input_norm") == f.at(k + "input_layernorm.weight"));
    CHECK(decode_parameter(a, p + "post_attention_norm") == f.at(k + "post_attention_layernorm.weight"));
    if (!f.opt.moe) {
        CHECK(decode_parameter(a, p + "mlp/gate") == f.at(k + "mlp.gate_proj.weight"));
        CHECK(decode_parameter(a, p + "mlp/up") == f.at(k + "mlp.up_proj.weight"));
        CHECK(decode_parameter(a, p + "mlp/down") == f.at(k + "mlp.down_proj.weight"));
        return;
    }
    CHECK(decode_parameter(a, p + "moe/router") == f.at(k + "mlp.gate.weight"));
    CHECK(decode_parameter(a, p + "moe/shared_score") == f.at(k + "mlp.shared_expert_gate.weight"));
    CHECK(decode_parameter(a, p + "moe/shared/gate") == f.at(k + "mlp.shared_expert.gate_proj.weight"));
    CHECK(decode_parameter(a, p + "moe/shared/up") == f.at(k + "mlp.shared_expert.up_proj.weight"));
    CHECK(decode_parameter(a, p + "moe/shared/down") == f.at(k + "mlp.shared_expert.down_proj.weight"));
    for (uint64_t e = 0; e < F::E; ++e) {
        std::string ep = p + "moe/experts/" + std::to_string(e) + "/";
        std::vector<float> gate, up, down;
        if (f.opt.fused_experts) {
            const std::vector<float>& gu = f.at(k + "mlp.experts.gate_up_proj");
            gate = rows(gu, F::H, e * 2 * F::MI, e * 2 * F::MI + F::MI); // gate rows first
            up = rows(gu, F::H, e * 2 * F::MI + F::MI, (e + 1) * 2 * F::MI);
            down = rows(f.at(k + "mlp.experts.down_proj"), F::MI, e * F::H, (e + 1) * F::H);
        } else {
            std::string ek = k + "mlp.experts." + std::to_string(e) + ".";
            gate = f.at(ek + "gate_proj.weight"), up = f.at(ek + "up_proj.weight"), down = f.at(ek + "down_proj.weight");
        }
        CHECK(decode_parameter(a, ep + "gate") == gate);
        CHECK(decode_parameter(a, ep + "up") == up);
        CHECK(decode_parameter(a, ep + "down") == down);
    }
}

// Every text parameter against the HF tensors, bit-exact (bf16 source, bf16 recipe).
void check_text(const core::Artifact& a, const Fixture& f) {
    const std::string tp = f.text_prefix();
    CHECK(decode_parameter(a, "text/token_embedding") == f.at(tp + "embed_tokens.weight"));
    CHECK(decode_parameter(a, "text/output_head") == f.at("lm_head.weight"));
    CHECK(decode_parameter(a, "text/final_norm") == f.at(tp + "norm.weight"));
    const uint64_t kd = F::HK * F::DK, vd = F::HV * F::DV, conv = 2 * kd + vd;
    for (uint64_t l = 0; l < F::L; ++l) {
        std::string p = "text/layers/" + std::to_string(l) + "/", k = tp + "layers." + std::to_string(l) + ".";
        check_ffn(a, f, p, k);
        if (l == 3) {
            check_attention(a, f, p, k);
            continue;
        }
        k += "linear_attn.";
        const std::vector<float>& qkv = f.at(k + "in_proj_qkv.weight");
        CHECK(decode_parameter(a, p + "gdn/query") == rows(qkv, F::H, 0, kd));
        CHECK(decode_parameter(a, p + "gdn/key") == rows(qkv, F::H, kd, 2 * kd));
        CHECK(decode_parameter(a, p + "gdn/value") == rows(qkv, F::H, 2 * kd, conv));
        CHECK(decode_parameter(a, p + "gdn/z") == f.at(k + "in_proj_z.weight"));
        CHECK(decode_parameter(a, p + "gdn/a_projection") == f.at(k + "in_proj_a.weight"));
        CHECK(decode_parameter(a, p + "gdn/b_projection") == f.at(k + "in_proj_b.weight"));
        CHECK(decode_parameter(a, p + "gdn/a_log") == f.at(k + "A_log"));
        CHECK(decode_parameter(a, p + "gdn/dt_bias") == f.at(k + "dt_bias"));
        CHECK(decode_parameter(a, p + "gdn/norm") == f.at(k + "norm.weight"));
        CHECK(decode_parameter(a, p + "gdn/output") == f.at(k + "out_proj.weight"));
        // conv1d.weight [C,1,taps] -> [taps, C]: convolution[t][c] = conv1d[c][0][t].
        const std::vector<float>& c1 = f.at(k + "conv1d.weight");
        std::vector<float> conv_taps = decode_parameter(a, p + "gdn/convolution");
        REQUIRE(conv_taps.size() == conv * F::TAPS);
        for (uint64_t t = 0; t < F::TAPS; ++t)
            for (uint64_t c = 0; c < conv; ++c)
                CHECK(conv_taps[t * conv + c] == c1[c * F::TAPS + t]);
    }
    // The a_log and dt_bias objects are stored as fp32.
    CHECK(a.binding("text/layers/0/gdn/a_log").pieces[0].tensor->format == core::TensorFormat::Fp32);
}

} // namespace

TEST_CASE("a sharded text-only dense checkpoint converts to the v3 parameters bit-exactly", "[hf_convert]") {
    FixtureOptions o;
    o.shards = 3;
    Fixture f = make_hf_checkpoint(temp_dir("dense"), o);
    auto a = convert(f, temp_dir("dense.ninfer"), "bf16");
    check_text(*a, f);
    CHECK_FALSE(a->is_synthetic());
    CHECK(a->metadata_name() == "dense");
    core::ModelConfig c = core::ModelConfig::from_json(a->component("text").config_json);
    CHECK(c.hidden_size == F::H);
    CHECK(c.linear_value_head_dim == F::DV);
    CHECK(c.mrope_section == std::vector<uint32_t>{2, 1, 1});
    CHECK(a->resource("text", "tokenizer.json")->text().find("<|im_end|>") != std::string_view::npos);
    CHECK(a->resource("text", "chat_template.jinja")->text().find("<|im_start|>") != std::string_view::npos);
    CHECK(a->resource("text", "generation_config.json")->text().find("302") != std::string_view::npos);
    CHECK_FALSE(a->has_component("mtp"));
    CHECK_FALSE(a->has_component("vision"));
}

TEST_CASE("the multimodal wrapper layout converts text, MTP and vision", "[hf_convert]") {
    FixtureOptions o;
    o.multimodal = true, o.mtp = true, o.vision = true;
    Fixture f = make_hf_checkpoint(temp_dir("wrapper"), o);
    auto a = convert(f, temp_dir("wrapper.ninfer"), "bf16", ComponentChoice::Include,
                     ComponentChoice::Include);
    check_text(*a, f);
    REQUIRE(a->has_component("mtp"));
    REQUIRE(a->has_component("vision"));
    CHECK(a->component("mtp").target == std::optional<std::string>("text"));
    CHECK(decode_parameter(*a, "mtp/input_projection") == f.at("mtp.fc.weight"));
    CHECK(decode_parameter(*a, "mtp/embedding_norm") == f.at("mtp.pre_fc_norm_embedding.weight"));
    CHECK(decode_parameter(*a, "mtp/hidden_norm") == f.at("mtp.pre_fc_norm_hidden.weight"));
    CHECK(decode_parameter(*a, "mtp/final_norm") == f.at("mtp.norm.weight"));
    check_attention(*a, f, "mtp/layers/0/", "mtp.layers.0.");
    check_ffn(*a, f, "mtp/layers/0/", "mtp.layers.0.");

    const std::string v = "model.visual.", b = v + "blocks.0.";
    CHECK(decode_parameter(*a, "vision/patch_embedding") == f.at(v + "patch_embed.proj.weight"));
    CHECK(a->binding("vision/patch_embedding").shape == std::vector<uint64_t>{F::VH, 3 * F::TPATCH * F::PATCH * F::PATCH});
    CHECK(decode_parameter(*a, "vision/position_embedding") == f.at(v + "pos_embed.weight"));
    const std::vector<float>& qkv = f.at(b + "attn.qkv.weight");
    const std::vector<float>& qkv_bias = f.at(b + "attn.qkv.bias");
    CHECK(decode_parameter(*a, "vision/layers/0/attention/key") == rows(qkv, F::VH, F::VH, 2 * F::VH));
    CHECK(decode_parameter(*a, "vision/layers/0/attention/value_bias") == rows(qkv_bias, 1, 2 * F::VH, 3 * F::VH));
    CHECK(decode_parameter(*a, "vision/layers/0/mlp/fc2") == f.at(b + "mlp.linear_fc2.weight"));
    CHECK(decode_parameter(*a, "vision/layers/0/norm2_bias") == f.at(b + "norm2.bias"));
    CHECK(decode_parameter(*a, "vision/merger/fc2") == f.at(v + "merger.linear_fc2.weight"));
}

TEST_CASE("conversion keeps every component the checkpoint has unless narrowed", "[hf_convert]") {
    FixtureOptions o;
    o.multimodal = true, o.mtp = true, o.vision = true;
    Fixture f = make_hf_checkpoint(temp_dir("components"), o);
    // The default keeps the MTP head and the vision tower of a checkpoint that has them.
    auto all = convert(f, temp_dir("components-all.ninfer"), "bf16");
    CHECK(all->has_component("mtp"));
    CHECK(all->has_component("vision"));
    CHECK(decode_parameter(*all, "mtp/input_projection") == f.at("mtp.fc.weight"));
    // Narrowed: only what is listed (text is always kept).
    auto text_mtp = convert(f, temp_dir("components-text-mtp.ninfer"), "bf16", ComponentChoice::Include,
                            ComponentChoice::Exclude);
    CHECK(text_mtp->has_component("mtp"));
    CHECK_FALSE(text_mtp->has_component("vision"));
    CHECK_FALSE(text_mtp->has_binding("vision/patch_embedding"));
    auto text = convert(f, temp_dir("components-text.ninfer"), "bf16", ComponentChoice::Exclude,
                        ComponentChoice::Exclude);
    CHECK_FALSE(text->has_component("mtp"));
    CHECK_FALSE(text->has_binding("mtp/input_projection"));
    CHECK_FALSE(text->has_component("vision"));
    check_text(*text, f);
    // A checkpoint without the extras converts by default to text alone.
    FixtureOptions plain;
    plain.multimodal = true;
    Fixture p = make_hf_checkpoint(temp_dir("components-plain"), plain);
    auto only_text = convert(p, temp_dir("components-plain.ninfer"), "bf16");
    CHECK_FALSE(only_text->has_component("mtp"));
    CHECK_FALSE(only_text->has_component("vision"));
}

TEST_CASE("fused and per-expert MoE checkpoints give identical artifacts' weights", "[hf_convert]") {
    FixtureOptions o;
    o.moe = true;
    Fixture split = make_hf_checkpoint(temp_dir("moe-split"), o);
    // The same values re-saved with fused expert tensors and the multimodal prefix.
    FixtureOptions fo = o;
    fo.fused_experts = true, fo.multimodal = true;
    Fixture fused = make_hf_checkpoint(temp_dir("moe-fused"), fo);
    fused.tensors.clear();
    for (auto& [key, t] : split.tensors) {
        std::string k = key.rfind("model.", 0) == 0 ? "model.language_model." + key.substr(6) : key;
        size_t at = k.find("mlp.experts.");
        if (at == std::string::npos) {
            fused.tensors[k] = t;
            continue;
        }
        std::string layer = k.substr(0, at + 12);
        SourceTensor& gu = fused.tensors[layer + "gate_up_proj"];
        SourceTensor& dn = fused.tensors[layer + "down_proj"];
        gu.shape = {F::E, 2 * F::MI, F::H}, dn.shape = {F::E, F::H, F::MI};
        gu.values.resize(F::E * 2 * F::MI * F::H), dn.values.resize(F::E * F::H * F::MI);
        uint64_t e = std::stoul(k.substr(at + 12));
        if (k.find("gate_proj") != std::string::npos)
            std::copy(t.values.begin(), t.values.end(), gu.values.begin() + long(e * 2 * F::MI * F::H));
        else if (k.find("up_proj") != std::string::npos)
            std::copy(t.values.begin(), t.values.end(), gu.values.begin() + long((e * 2 + 1) * F::MI * F::H));
        else
            std::copy(t.values.begin(), t.values.end(), dn.values.begin() + long(e * F::H * F::MI));
    }
    fs::remove(fs::path(fused.dir) / "model.safetensors");
    write_safetensors((fs::path(fused.dir) / "model.safetensors").string(), fused.tensors);

    for (const char* recipe : {"bf16", "q4"}) {
        auto a = convert(split, temp_dir(std::string("split-") + recipe + ".ninfer"), recipe);
        auto b = convert(fused, temp_dir(std::string("fused-") + recipe + ".ninfer"), recipe);
        if (std::string(recipe) == "bf16") {
            check_text(*a, split);
            check_text(*b, fused);
        }
        REQUIRE(a->bindings().size() == b->bindings().size());
        for (auto& [name, binding] : a->bindings())
            CHECK(decode_parameter(*a, name) == decode_parameter(*b, name));
        REQUIRE(a->tensors().size() == b->tensors().size());
        for (size_t i = 0; i < a->tensors().size(); ++i) {
            const core::StoredTensor &x = a->tensors()[i], &y = b->tensors()[i];
            CHECK(x.id == y.id);
            CHECK((x.bytes == y.bytes && std::memcmp(x.data, y.data, x.bytes) == 0));
        }
    }
}

TEST_CASE("F16 and F32 sources convert to the same bf16 weights as their rounded values", "[hf_convert]") {
    for (const char* dtype : {"F16", "F32"}) {
        FixtureOptions o;
        o.dtype = dtype;
        Fixture f = make_hf_checkpoint(temp_dir(std::string("dtype-") + dtype), o);
        auto a = convert(f, temp_dir(std::string("dtype-") + dtype + ".ninfer"), "bf16");
        std::vector<float> want = f.at("model.layers.0.linear_attn.in_proj_z.weight");
        for (float& v : want)
            v = core::bf16_to_f32(core::f32_to_bf16(v));
        CHECK(decode_parameter(*a, "text/layers/0/gdn/z") == want);
        // fp32 parameters keep the source precision.
        CHECK(decode_parameter(*a, "text/layers/0/gdn/a_log") == f.at("model.layers.0.linear_attn.A_log"));
    }
}
