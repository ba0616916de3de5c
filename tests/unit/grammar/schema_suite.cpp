// JSON-Schema-Test-Suite (Debian json-schema-test-suite, draft 7, with optional/format) through the schema compiler:
// invalid instances are never accepted, valid ones are counted (completeness per keyword file),
// and random strings of every compiled grammar validate with ajv.
#include "grammar_support.h"

#include <catch2/catch.hpp>
#include <simdjson.h>

#include <filesystem>
#include <map>

using ninfer::core::grammar::Grammar;
using namespace ninfer::test;

namespace {

constexpr const char* kSuiteDir = "/usr/share/json-schema-test-suite/tests/draft7";

struct FileStats {
    size_t groups = 0, refused = 0, valid = 0, valid_accepted = 0, invalid = 0;
};

} // namespace

TEST_CASE("draft-7 suite: no invalid instance accepted; random strings validate with ajv", "[schema_suite]") {
    REQUIRE(std::filesystem::is_directory(kSuiteDir)); // apt-get install json-schema-test-suite
    std::vector<std::filesystem::path> files;
    for (const std::string& dir : {std::string(kSuiteDir), std::string(kSuiteDir) + "/optional/format"})
        for (const auto& entry : std::filesystem::directory_iterator(dir))
            if (entry.path().extension() == ".json") files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    simdjson::dom::parser parser;
    std::map<std::string, FileStats> stats;
    std::vector<OracleGroup> oracle;
    std::vector<std::string> unsound;
    std::mt19937 rng(7);
    size_t n_walks = 0, n_walks_done = 0;
    for (const auto& path : files) {
        const std::string keyword = (path.parent_path().filename() == "format" ? "format/" : "") + path.stem().string();
        FileStats& st = stats[keyword];
        simdjson::dom::element doc;
        REQUIRE_FALSE(parser.load(path.string()).get(doc));
        for (simdjson::dom::element group : simdjson::dom::array(doc)) {
            ++st.groups;
            const std::string schema_text = simdjson::minify(group["schema"]);
            std::shared_ptr<const Grammar> g;
            try {
                g = Grammar::from_json_schema(schema_text);
            } catch (const ninfer::Error&) {
                ++st.refused;
                continue;
            }
            for (simdjson::dom::element test : simdjson::dom::array(group["tests"])) {
                const std::string instance = simdjson::minify(test["data"]);
                const bool accepted = grammar_matches(g, instance);
                if (bool(test["valid"])) {
                    ++st.valid;
                    st.valid_accepted += accepted;
                } else {
                    ++st.invalid;
                    if (accepted) unsound.push_back(keyword + ": " + schema_text + " accepted " + instance);
                }
            }
            OracleGroup og{schema_text, "7", {}};
            for (int k = 0; k < 12; ++k) {
                bool ok = false;
                std::string s = grammar_random_walk(g, byte_index(), rng, ok);
                ++n_walks;
                if (ok) { ++n_walks_done; og.instances.push_back(std::move(s)); }
            }
            oracle.push_back(std::move(og));
        }
    }
    size_t groups = 0, refused = 0, valid = 0, accepted = 0;
    std::printf("%-24s %7s %8s %14s\n", "draft7 file", "groups", "refused", "valid accepted");
    for (const auto& [keyword, st] : stats) {
        std::printf("%-24s %7zu %8zu %8zu/%-5zu\n", keyword.c_str(), st.groups, st.refused, st.valid_accepted, st.valid);
        groups += st.groups; refused += st.refused; valid += st.valid; accepted += st.valid_accepted;
    }
    std::printf("%-24s %7zu %8zu %8zu/%-5zu\n", "total", groups, refused, accepted, valid);
    for (const std::string& u : unsound) UNSCOPED_INFO(u);
    CHECK(unsound.empty());
    const auto [checked, failures] = ajv_validate(oracle, "suite");
    std::printf("random strings: %zu walks, %zu ended, %zu checked by ajv\n", n_walks, n_walks_done, checked);
    for (const std::string& f : failures) UNSCOPED_INFO(f);
    CHECK(failures.empty());
    CHECK(checked == n_walks_done);
    CHECK(groups - refused > groups / 3); // the suite is not mostly refused
}
