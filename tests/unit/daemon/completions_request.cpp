// ninfer tests - /v1/completions request parsing: prompt forms and the benchmark extensions.
#include "daemon/api_error.h"
#include "daemon/completions_session.h"

#include <catch2/catch.hpp>

using namespace ninfer::daemon;

TEST_CASE("token-id prompts, ignore_eos and continuous usage parse", "[completions_request]") {
    CompletionsRequest r = parse_completions_request(
        R"({"prompt":[5,6,7],"max_tokens":9,"stream":true,"ignore_eos":true,
            "stream_options":{"include_usage":true,"continuous_usage_stats":true}})");
    CHECK(r.prompt_ids == std::vector<int32_t>{5, 6, 7});
    CHECK(r.prompt.empty());
    CHECK(*r.chat.max_tokens == 9);
    CHECK(r.chat.stream);
    CHECK(r.chat.include_usage);
    CHECK(r.chat.continuous_usage);
    CHECK(r.chat.ignore_eos);
}

TEST_CASE("the extensions are off unless asked", "[completions_request]") {
    CompletionsRequest r = parse_completions_request(R"({"prompt":"hi","stream_options":{"include_usage":true}})");
    CHECK(r.prompt == "hi");
    CHECK(*r.chat.max_tokens == 16);
    CHECK(r.chat.include_usage);
    CHECK_FALSE(r.chat.continuous_usage);
    CHECK_FALSE(r.chat.ignore_eos);
    CHECK_FALSE(parse_completions_request(R"({"prompt":"hi","ignore_eos":null})").chat.ignore_eos);
}

TEST_CASE("wrong types of the extensions are 400s naming the field", "[completions_request]") {
    auto param_of = [](const char* body) {
        try {
            parse_completions_request(body);
        } catch (const ApiError& e) {
            CHECK(e.status == 400);
            return e.param;
        }
        FAIL("no error for " << body);
        return std::string();
    };
    CHECK(param_of(R"({"prompt":"x","ignore_eos":1})") == "ignore_eos");
    CHECK(param_of(R"({"prompt":"x","stream_options":{"continuous_usage_stats":"yes"}})") ==
          "stream_options.continuous_usage_stats");
    CHECK(param_of(R"({"prompt":[1,"x"]})") == "prompt");
}
