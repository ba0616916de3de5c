// ninfer tests - recipes and --format overrides: each group gets its format, every format of the
// spec is reachable, values stay close to the source, and unstorable choices are refused.
#include "hf_fixture.h"

#include "core/convert/convert.h"
#include "core/convert/recipe.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace ninfer;
using namespace ninfer::test;
using Catch::Matchers::Contains;
using core::TensorFormat;

namespace {

std::unique_ptr<core::Artifact> convert(const Fixture& f, const std::string& out, const core::Recipe& recipe) {
    core::ConvertRequest r;
    r.src_dir = f.dir;
    r.out_path = out;
    r.recipe = recipe;
    r.force = true;
    core::convert_checkpoint(r);
    return core::Artifact::open(out);
}

TensorFormat format_of(const core::Artifact& a, const std::string& parameter) {
    return a.binding(parameter).pieces.at(0).tensor->format;
}

// RMS of the decoding error relative to the RMS of the source.
double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
    REQUIRE(got.size() == want.size());
    double err = 0, ref = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        err += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
        ref += double(want[i]) * want[i];
    }
    return std::sqrt(err / ref);
}

double error_bound(TensorFormat f) {
    switch (f) {
    case TensorFormat::Bf16: return 0.005;
    case TensorFormat::Fp32: return 1e-7;
    case TensorFormat::Q8G32Fp16: return 0.01;
    case TensorFormat::Fp8E4m3fnRowBf16: return 0.05;
    case TensorFormat::Q6G64Fp16: return 0.04;
    case TensorFormat::Q5G64Fp16: return 0.08;
    default: return 0.2; // q4, nvfp4
    }
}

Fixture& moe_fixture() {
    static Fixture f = [] {
        FixtureOptions o;
        o.moe = true;
        return make_hf_checkpoint(temp_dir("recipes-moe"), o);
    }();
    return f;
}

} // namespace

TEST_CASE("each recipe stores its groups in the documented formats", "[recipes]") {
    const Fixture& f = moe_fixture();
    struct Row {
        const char* recipe;
        TensorFormat query, gate, embedding, experts_down, shared, router, gdn_a;
    } table[] = {
        {"bf16", TensorFormat::Bf16, TensorFormat::Bf16, TensorFormat::Bf16, TensorFormat::Bf16,
         TensorFormat::Bf16, TensorFormat::Bf16, TensorFormat::Bf16},
        {"fp8", TensorFormat::Fp8E4m3fnRowBf16, TensorFormat::Fp8E4m3fnRowBf16, TensorFormat::Fp8E4m3fnRowBf16,
         TensorFormat::Fp8E4m3fnRowBf16, TensorFormat::Fp8E4m3fnRowBf16, TensorFormat::Bf16, TensorFormat::Bf16},
        {"q8", TensorFormat::Q8G32Fp16, TensorFormat::Q8G32Fp16, TensorFormat::Q8G32Fp16, TensorFormat::Q8G32Fp16,
         TensorFormat::Q8G32Fp16, TensorFormat::Bf16, TensorFormat::Bf16},
        {"q4", TensorFormat::Q4G64Fp16, TensorFormat::Q5G64Fp16, TensorFormat::Q6G64Fp16, TensorFormat::Q5G64Fp16,
         TensorFormat::Q8G32Fp16, TensorFormat::Bf16, TensorFormat::Bf16},
    };
    for (const Row& row : table) {
        SECTION(row.recipe) {
            auto a = convert(f, temp_dir(std::string("recipe-") + row.recipe + ".ninfer"), core::Recipe::parse(row.recipe));
            CHECK(format_of(*a, "text/layers/3/attention/query") == row.query);
            CHECK(format_of(*a, "text/layers/3/attention/gate") == row.gate);
            CHECK(format_of(*a, "text/token_embedding") == row.embedding);
            CHECK(format_of(*a, "text/layers/0/moe/experts/2/down") == row.experts_down);
            CHECK(format_of(*a, "text/layers/0/moe/shared/up") == row.shared);
            CHECK(format_of(*a, "text/layers/0/moe/router") == row.router);
            CHECK(format_of(*a, "text/layers/0/gdn/a_projection") == row.gdn_a);
            // Fixed groups never change.
            CHECK(format_of(*a, "text/layers/0/gdn/a_log") == TensorFormat::Fp32);
            CHECK(format_of(*a, "text/layers/0/gdn/convolution") == TensorFormat::Bf16);
            CHECK(format_of(*a, "text/final_norm") == TensorFormat::Bf16);
        }
    }
}

TEST_CASE("--format reaches every format of the spec and keeps values close", "[recipes]") {
    const Fixture& f = moe_fixture();
    const std::vector<float>& embedding = f.at("model.embed_tokens.weight");
    for (const char* name : {"bf16", "fp32", "q4_g64_fp16", "q5_g64_fp16", "q6_g64_fp16", "q8_g32_fp16",
                             "fp8_e4m3fn_row_bf16"}) {
        core::Recipe r = core::Recipe::parse("q4");
        r.apply_override(std::string("embedding=") + name);
        auto a = convert(f, temp_dir(std::string("format-") + name + ".ninfer"), r);
        TensorFormat want = core::format_from_name(name);
        CHECK(format_of(*a, "text/token_embedding") == want);
        CHECK(relative_error(decode_parameter(*a, "text/token_embedding"), embedding) < error_bound(want));
        // Provenance lists the overrides that differ from the recipe (q4 stores embeddings as q6).
        bool differs = want != core::Recipe::parse("q4").format(core::TensorGroup::Embedding);
        CHECK((a->provenance_json().find(std::string("\"embedding\":\"") + name) != std::string::npos) == differs);
    }
    // nvfp4 on a group whose matrix has rows % 128 == 0 and columns % 64 == 0: all routed experts'
    // gate|up of a layer ([4 * 2 * 32, 64]).
    core::Recipe r = core::Recipe::parse("bf16");
    r.apply_override("moe_experts_gate_up=nvfp4");
    r.apply_override("moe_experts_down=q6_g64_fp16");
    auto a = convert(f, temp_dir("format-nvfp4.ninfer"), r);
    CHECK(format_of(*a, "text/layers/2/moe/experts/1/up") == TensorFormat::Nvfp4);
    CHECK(format_of(*a, "text/layers/2/moe/experts/1/down") == TensorFormat::Q6G64Fp16);
    std::vector<float> gu = f.at("model.layers.2.mlp.experts.1.up_proj.weight");
    CHECK(relative_error(decode_parameter(*a, "text/layers/2/moe/experts/1/up"), gu) < error_bound(TensorFormat::Nvfp4));
}

TEST_CASE("quantized recipes stay close to the source weights", "[recipes]") {
    const Fixture& f = moe_fixture();
    for (const char* recipe : {"fp8", "q8", "q4"}) {
        auto a = convert(f, temp_dir(std::string("close-") + recipe + ".ninfer"), core::Recipe::parse(recipe));
        struct Pair {
            const char* parameter;
            std::string key;
        } pairs[] = {{"text/layers/3/attention/key", "model.layers.3.self_attn.k_proj.weight"},
                     {"text/layers/0/gdn/z", "model.layers.0.linear_attn.in_proj_z.weight"},
                     {"text/layers/1/moe/experts/3/gate", "model.layers.1.mlp.experts.3.gate_proj.weight"},
                     {"text/layers/1/moe/shared/down", "model.layers.1.mlp.shared_expert.down_proj.weight"},
                     {"text/output_head", "lm_head.weight"}};
        for (const Pair& p : pairs) {
            INFO(recipe << " " << p.parameter);
            CHECK(relative_error(decode_parameter(*a, p.parameter), f.at(p.key)) <
                  error_bound(format_of(*a, p.parameter)));
        }
    }
}

TEST_CASE("unstorable formats, unknown groups and fixed groups are refused", "[recipes]") {
    const Fixture& f = moe_fixture();
    core::Recipe r = core::Recipe::parse("q8");
    r.apply_override("attention_qk=nvfp4");
    std::string out = temp_dir("nvfp4-bad.ninfer");
    CHECK_THROWS_WITH(convert(f, out, r), Contains("nvfp4 needs rows % 128 == 0 and columns % 64 == 0") &&
                                              Contains("text/layers/3/attention/query_key") && Contains("[192,64]"));
    CHECK_FALSE(fs::exists(out));
    CHECK_THROWS_WITH(r.apply_override("attention=q4_g64_fp16"), Contains("unknown tensor group \"attention\""));
    CHECK_THROWS_WITH(r.apply_override("embedding=q3"), Contains("unknown format \"q3\""));
    CHECK_THROWS_WITH(r.apply_override("norm=q8_g32_fp16"), Contains("fixed format"));
    CHECK_THROWS_WITH(r.apply_override("embedding"), Contains("GROUP=FORMAT"));
    CHECK_THROWS_WITH(core::Recipe::parse("q2"), Contains("unknown recipe \"q2\"") && Contains("bf16, fp8, q8, q4"));
}
