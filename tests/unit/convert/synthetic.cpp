// ninfer tests - synthetic artifacts: complete tiny shapes, seeded determinism, init-like value
// ranges, the synthetic marker and its warning.
#include "hf_fixture.h"

#include "core/convert/synthetic.h"
#include "core/model/config.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace ninfer;
using namespace ninfer::test;
using Catch::Matchers::Contains;

namespace {

std::unique_ptr<core::Artifact> synth(const std::string& shape, const std::string& recipe, uint64_t seed,
                                      const std::string& name, unsigned threads = 0, bool mtp = false,
                                      uint64_t band_bytes = 8ull << 20) {
    core::SyntheticRequest r;
    r.band_bytes = band_bytes;
    r.shape = shape;
    r.out_path = temp_dir(name);
    r.recipe = core::Recipe::parse(recipe);
    r.seed = seed;
    r.force = true;
    r.n_threads = threads;
    r.with_mtp = mtp;
    core::write_synthetic(r);
    return core::Artifact::open(r.out_path);
}

double mean(const std::vector<float>& v) {
    double s = 0;
    for (float x : v)
        s += x;
    return s / double(v.size());
}

double stddev(const std::vector<float>& v) {
    double m = mean(v), s = 0;
    for (float x : v)
        s += (x - m) * (x - m);
    return std::sqrt(s / double(v.size()));
}

bool same_tensors(const core::Artifact& a, const core::Artifact& b) {
    if (a.tensors().size() != b.tensors().size())
        return false;
    for (size_t i = 0; i < a.tensors().size(); ++i) {
        const core::StoredTensor &x = a.tensors()[i], &y = b.tensors()[i];
        if (x.id != y.id || x.bytes != y.bytes || std::memcmp(x.data, y.data, x.bytes) != 0)
            return false;
    }
    return true;
}

} // namespace

TEST_CASE("synthetic tiny is complete, small, marked and warned about", "[synthetic]") {
    auto a = synth("tiny", std::string(core::kDefaultRecipe), 1, "tiny.ninfer");
    CHECK(a->file_bytes() <= 40'000'000);
    CHECK(a->is_synthetic());
    CHECK(a->metadata_name() == "tiny");
    CHECK_THAT(a->provenance_json(), Contains("\"shape\":\"tiny\"") && Contains("\"seed\":1"));
    CHECK_THAT(core::warn_if_synthetic(*a), Contains("synthetic"));
    core::ModelConfig c = core::ModelConfig::from_json(a->component("text").config_json);
    CHECK(c == core::synthetic_shape_config("tiny"));
    CHECK(c.vocab_size == 151936);
    CHECK(c.num_attention_heads / c.num_key_value_heads > 1);
    CHECK(c.linear_num_value_heads > c.linear_num_key_heads);
    CHECK(c.linear_value_head_dim != c.linear_key_head_dim);
    CHECK(c.rotary_dim() < c.head_dim);
    // Every parameter the model needs is bound with its shape.
    CHECK(a->binding("text/token_embedding").shape == std::vector<uint64_t>{151936, 64});
    CHECK(a->binding("text/layers/3/attention/gate").shape == std::vector<uint64_t>{256, 64});
    CHECK(a->binding("text/layers/0/gdn/convolution").shape == std::vector<uint64_t>{4, 320});
    CHECK(a->binding("text/layers/2/mlp/down").shape == std::vector<uint64_t>{64, 128});
    // Stop ids come from the Qwen3 tokenizer by text: <|im_end|> 151645, <|endoftext|> 151643.
    CHECK(a->resource("text", "generation_config.json")->text().find("[151645,151643]") != std::string_view::npos);
    CHECK_FALSE(a->resource("text", "chat_template.jinja")->text().empty());
}

TEST_CASE("synthetic weights look like an init", "[synthetic]") {
    for (const char* recipe : {"bf16", "fp8", "q8", "q4"}) {
        INFO(recipe);
        auto a = synth("tiny", recipe, 3, std::string("init-") + recipe + ".ninfer");
        for (const char* p : {"text/token_embedding", "text/layers/3/attention/query", "text/layers/1/gdn/value",
                              "text/layers/0/mlp/gate", "text/output_head"}) {
            std::vector<float> w = decode_parameter(*a, p);
            INFO(p);
            CHECK(std::abs(stddev(w) - 0.02) < 0.004);
            CHECK(std::abs(mean(w)) < 0.002);
        }
        std::vector<float> norm = decode_parameter(*a, "text/layers/1/input_norm");
        CHECK(std::abs(mean(norm)) < 0.05);
        CHECK(stddev(norm) < 0.1);
        for (float g : decode_parameter(*a, "text/layers/0/gdn/norm"))
            CHECK((g > 0.7f && g < 1.3f));
        for (float x : decode_parameter(*a, "text/layers/0/gdn/a_log"))
            CHECK((x >= 0.0f && x <= std::log(16.0f) + 1e-5f));
        for (float x : decode_parameter(*a, "text/layers/0/gdn/dt_bias"))
            CHECK((x > -7.0f && x < -2.2f)); // softplus^-1 of dt in [1e-3, 1e-1]
    }
}

TEST_CASE("synthetic output depends only on shape, recipe and seed", "[synthetic]") {
    auto a = synth("tiny-moe", "q4", 42, "det-a.ninfer", 1);
    auto b = synth("tiny-moe", "q4", 42, "det-b.ninfer", 4);
    auto c = synth("tiny-moe", "q4", 43, "det-c.ninfer", 2);
    CHECK(same_tensors(*a, *b));
    CHECK_FALSE(same_tensors(*a, *c));
    CHECK(a->binding("text/layers/1/moe/experts/7/down").shape == std::vector<uint64_t>{64, 32});
    CHECK(a->binding("text/layers/1/moe/shared_score").shape == std::vector<uint64_t>{1, 64});
    // The direct code fill (K % 128 == 0) is deterministic too: MTP's input projection is [64,128].
    auto m1 = synth("tiny", "q4", 5, "det-m1.ninfer", 1, true);
    auto m2 = synth("tiny", "q4", 5, "det-m2.ninfer", 3, true);
    CHECK(same_tensors(*m1, *m2));
    CHECK(m1->has_component("mtp"));
    std::vector<float> fc = decode_parameter(*m1, "mtp/input_projection");
    CHECK(std::abs(stddev(fc) - 0.02) < 0.004);
}

TEST_CASE("synthetic bytes do not depend on band size or thread count", "[synthetic]") {
    // Bands of 1000 and 4096 bytes cut every plane in many places (partial words at plane ends,
    // float-path objects a few rows at a time); each recipe exercises other formats.
    for (const char* recipe : {"q4", "bf16", "fp8", "q8"}) {
        auto whole = synth("tiny-moe", recipe, 9, "band-a.ninfer", 1, true);
        auto small = synth("tiny-moe", recipe, 9, "band-b.ninfer", 3, true, 1000);
        auto mid = synth("tiny-moe", recipe, 9, "band-c.ninfer", 2, true, 4096);
        CHECK(same_tensors(*whole, *small));
        CHECK(same_tensors(*whole, *mid));
    }
    core::SyntheticRequest r;
    r.shape = "tiny";
    r.recipe = core::Recipe::parse("q4");
    r.generate_only = true;
    r.out_path = temp_dir("never-written.ninfer");
    CHECK(core::write_synthetic(r) > 0);
    CHECK_FALSE(std::filesystem::exists(r.out_path));
}

TEST_CASE("unknown synthetic shapes are refused with the list", "[synthetic]") {
    CHECK_THROWS_WITH(core::synthetic_shape_config("huge"), Contains("tiny, tiny-moe, qwen3.6-27b, qwen3.6-35b-a3b"));
    CHECK(core::synthetic_shape_config("qwen3.6-27b").intermediate_size == 17408);
    CHECK(core::synthetic_shape_config("qwen3.6-35b-a3b").num_experts == 256);
}
