// ninfer tests - prefill: chunked equals whole, chunked GDN equals the recurrence through the whole
// model, and prefill equals token-by-token decode.
#include "tests/unit/cpu/tiny_models.h"

#include <catch2/catch.hpp>

using namespace ninfer::core;
using namespace ninfer::test;

namespace {

std::vector<float> prefill_in_chunks(Backend& b, const std::vector<int32_t>& tokens,
                                     const std::vector<size_t>& chunks) {
    std::vector<float> all, part;
    size_t at = 0;
    for (size_t n : chunks) {
        b.prefill(0, std::span(tokens).subspan(at, n), LogitsOut::All, &part);
        all.insert(all.end(), part.begin(), part.end());
        at += n;
    }
    REQUIRE(at == tokens.size());
    return all;
}

} // namespace

TEST_CASE("prefill: chunked prefill equals one whole prefill", "[prefill]") {
    for (bool moe : {false, true}) {
        const ModelConfig c = tiny_config(moe);
        auto model = InMemoryModel::random(c, {.seed = 3, .fuse = moe});
        const ModelWeights w = model->weights();
        const MemoryPlan plan = tiny_plan(c, 1);
        auto backend = make_cpu_backend(w, plan);
        const std::vector<int32_t> tokens = random_tokens(170, c.vocab_size, 11);
        const std::vector<float> whole = prefill_in_chunks(*backend, tokens, {170});
        for (const std::vector<size_t>& chunks : std::vector<std::vector<size_t>>{
                 {64, 64, 42}, {1, 63, 100, 6}, {37, 50, 83}}) {
            backend->reset_lane(0);
            const std::vector<float> chunked = prefill_in_chunks(*backend, tokens, chunks);
            INFO("moe " << moe << ", first chunk " << chunks[0]);
            CHECK(relative_error(chunked, whole) < 1e-5);
        }
    }
}

TEST_CASE("prefill: chunked GDN form equals the recurrence through the whole model", "[prefill]") {
    const ModelConfig c = tiny_config(false);
    auto model = InMemoryModel::random(c, {.seed = 5});
    const ModelWeights w = model->weights();
    const MemoryPlan plan = tiny_plan(c, 1);
    auto chunked = make_cpu_backend(w, plan, {.gdn_chunked = true});
    auto recurrent = make_cpu_backend(w, plan, {.gdn_chunked = false});
    const std::vector<int32_t> tokens = random_tokens(200, c.vocab_size, 12);
    std::vector<float> a, b;
    chunked->prefill(0, tokens, LogitsOut::All, &a);
    recurrent->prefill(0, tokens, LogitsOut::All, &b);
    CHECK(relative_error(a, b) < 1e-4);
}

TEST_CASE("prefill: prefill logits equal token-by-token decode logits", "[prefill]") {
    const ModelConfig c = tiny_config(true);
    auto model = InMemoryModel::random(c, {.seed = 9});
    const ModelWeights w = model->weights();
    const MemoryPlan plan = tiny_plan(c, 2);
    auto backend = make_cpu_backend(w, plan);
    const std::vector<int32_t> tokens = random_tokens(80, c.vocab_size, 13);
    std::vector<float> whole, step;
    backend->prefill(0, tokens, LogitsOut::All, &whole);
    backend->prefill(1, std::span(tokens).first(1), LogitsOut::Last, &step);
    std::vector<float> stepped = step;
    for (size_t i = 1; i < tokens.size(); ++i) {
        DecodeStep s;
        s.lane = 1;
        s.token = tokens[i];
        backend->decode(std::span(&s, 1));
        const std::vector<float> l = backend->last_logits(1);
        stepped.insert(stepped.end(), l.begin(), l.end());
    }
    CHECK(relative_error(stepped, whole) < 1e-4);
    CHECK(backend->lane_length(1) == tokens.size());
}

TEST_CASE("prefill: errors name the problem", "[prefill]") {
    const ModelConfig c = tiny_config(false);
    auto model = InMemoryModel::random(c);
    const ModelWeights w = model->weights();
    const MemoryPlan plan = tiny_plan(c, 1, KvDtype::Bf16, 64);
    auto backend = make_cpu_backend(w, plan);
    const std::vector<int32_t> bad = {1, int32_t(c.vocab_size)};
    CHECK_THROWS_WITH(backend->prefill(0, bad, LogitsOut::Last, nullptr),
                      Catch::Contains("outside the vocabulary"));
    CHECK_THROWS_WITH(backend->prefill(1, random_tokens(3, c.vocab_size, 1), LogitsOut::Last, nullptr),
                      Catch::Contains("out of range"));
    CHECK_THROWS_WITH(backend->prefill(0, random_tokens(65, c.vocab_size, 1), LogitsOut::Last, nullptr),
                      Catch::Contains("context full"));
}
