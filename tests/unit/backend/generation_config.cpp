// ninfer tests - generation_config.json parsing and the layered sampling defaults (fallback < model
// < server options < request) that ninferd and `ninferctl run` share.
#include "core/backend/generation_config.h"
#include "core/util/error.h"

#include <catch2/catch.hpp>

using namespace ninfer::core;

TEST_CASE("generation_config.json gives stop ids and sampling defaults", "[generation_config]") {
    // The shape of Qwen3.6's own file.
    GenerationConfig g = parse_generation_config(
        R"({"bos_token_id":248044,"do_sample":true,"eos_token_id":[248046,248044],"pad_token_id":248044,)"
        R"("temperature":0.6,"top_k":20,"top_p":0.95,"transformers_version":"4.57.0"})");
    CHECK(g.stop_ids == std::vector<int32_t>{248046, 248044});
    CHECK(g.sampling.temperature == Approx(0.6));
    CHECK(g.sampling.top_p == Approx(0.95));
    CHECK(g.sampling.top_k == 20);
    CHECK_FALSE(g.sampling.min_p.has_value());
    CHECK_FALSE(g.sampling.seed.has_value());
    GenerationConfig more = parse_generation_config(
        R"({"eos_token_id":7,"min_p":0.05,"repetition_penalty":1.1,"presence_penalty":1.5,"top_k":-1})");
    CHECK(more.stop_ids == std::vector<int32_t>{7});
    CHECK(more.sampling.min_p == Approx(0.05));
    CHECK(more.sampling.repetition_penalty == Approx(1.1));
    CHECK(more.sampling.presence_penalty == Approx(1.5));
    CHECK(more.sampling.top_k == 0);
    CHECK(parse_generation_config(R"({"do_sample":false,"temperature":0.7})").sampling.temperature == 0.0f);
    CHECK(parse_generation_config(R"({"temperature":"hot"})").sampling == SamplingDefaults{});
}

TEST_CASE("a bad generation_config.json is a clear error", "[generation_config]") {
    CHECK_THROWS_WITH(parse_generation_config("{"), Catch::Contains("generation_config: not valid JSON"));
    CHECK_THROWS_WITH(parse_generation_config("[]"), Catch::Contains("not a JSON object"));
    CHECK_THROWS_WITH(parse_generation_config(R"({"top_p":3})"), Catch::Contains("top_p"));
    CHECK_THROWS_WITH(parse_generation_config(R"({"eos_token_id":["x"]})"), Catch::Contains("eos_token_id"));
}

TEST_CASE("sampling layers: fallback, then model, then server, then request", "[generation_config]") {
    const SamplingParams neutral = resolve_sampling({}, {}, {});
    CHECK(neutral.temperature == 1.0f);
    CHECK(neutral.top_p == 1.0f);
    CHECK(neutral.top_k == 0);
    CHECK(neutral.repetition_penalty == 1.0f);
    CHECK(neutral.seed == 0);
    SamplingDefaults model;
    model.temperature = 0.6f, model.top_p = 0.95f, model.top_k = 20;
    SamplingDefaults server;
    server.top_k = 40, server.seed = 9;
    SamplingDefaults request;
    request.temperature = 0.0f;
    const SamplingParams p = resolve_sampling(model, server, request);
    CHECK(p.temperature == 0.0f);
    CHECK(p.top_p == Approx(0.95));
    CHECK(p.top_k == 40);
    CHECK(p.seed == 9);
    CHECK(sampling_defaults_over(model, server).top_p == model.top_p);
    CHECK(sampling_defaults_over(model, server).top_k == 40);
}
