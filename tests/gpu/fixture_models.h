// ninfer tests (GPU) - the committed model fixtures as the GPU tests use them: their transformers
// references (refs.json), conversion to an artifact of a recipe, a plan, and logit comparisons.
//
// Contract: the references come from tests/unit/model/oracle_support.h (read_refs, FixtureRefs,
// PromptRef: the CPU oracle tests read the same files). load(fixture, recipe) converts
// tests/fixtures/model/FIXTURE/hf with the recipe ("q4" = every matrix q4_g64_fp16, the formats the
// CUDA kernels take) into /tmp/ninfer-gpu-fixtures/ and plans 8 lanes of 512 tokens (load_recipe:
// any Recipe, e.g. with --format overrides, and a KV dtype); cosine() and kl() compare logit rows
// (kl in nats, softmax of each row); step() builds a DecodeStep with default (greedy) sampling;
// run_lanes() prefills 8 lanes and decodes them greedily in batches, returning every step's logits.
#pragma once

#include "core/artifact/artifact.h"
#include "core/convert/convert.h"
#include "core/backend/backend.h"
#include "core/formats/format.h"
#include "core/model/memory_plan.h"
#include "core/model/weights.h"
#include "tests/unit/model/oracle_support.h"

#include <catch2/catch.hpp>

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace ninfer::test {

// The fixtures whose shapes the CUDA kernels cover (head_dim 256, GDN dims 128).
inline const std::vector<std::string> kKernelFixtures = {"kernel/dense", "kernel/moe"};

using namespace ninfer::core;

// "q4" here means every matrix q4_g64_fp16 (the CUDA kernels' formats), the recipe's bf16
// exceptions kept; "bf16" and "fp8" are the converter's recipes.
inline Recipe recipe_for(const std::string& name) {
    if (name != "q4") return Recipe::parse(name);
    Recipe r = Recipe::parse("q4");
    for (size_t g = 0; g < kMatrixGroupCount; ++g) {
        const TensorFormat f = r.format(TensorGroup(g));
        if (f != TensorFormat::Bf16 && f != TensorFormat::Q4G64Fp16 && f != TensorFormat::Fp8E4m3fnRowBf16)
            r.apply_override(std::string(tensor_group_name(TensorGroup(g))) + "=q4_g64_fp16");
    }
    return r;
}

struct Model {
    std::unique_ptr<Artifact> artifact;
    ModelWeights weights;
    MemoryPlan plan;
};

// load() with a recipe object (for --format overrides) written to FIXTURE-TAG.ninfer, and the
// plan's KV dtype.
inline std::unique_ptr<Model> load_recipe(const std::string& fixture, const Recipe& recipe, const std::string& tag,
                                          KvDtype kv_dtype = KvDtype::Bf16, uint32_t prefill_chunk = 256) {
    const std::string dir = "/tmp/ninfer-gpu-fixtures/";
    std::filesystem::create_directories(dir);
    std::string stem = fixture + "-" + tag;
    std::replace(stem.begin(), stem.end(), '/', '_');
    ConvertRequest req;
    req.src_dir = kFixtureRoot + fixture + "/hf";
    req.out_path = dir + stem + ".ninfer";
    req.recipe = recipe;
    req.force = true;
    convert_checkpoint(req);
    auto m = std::make_unique<Model>();
    m->artifact = Artifact::open(req.out_path);
    m->weights = ModelWeights::from_artifact(*m->artifact);
    MemoryRequest mr;
    mr.max_context = 512;
    mr.max_concurrency = 8;
    mr.weight_bytes = m->weights.stored_bytes();
    mr.available_bytes = 1ull << 34;
    mr.prefill_chunk = prefill_chunk;
    mr.kv_dtype = kv_dtype;
    m->plan = MemoryPlan::make(m->weights.config, mr);
    return m;
}

// prefill_chunk: the plan's prefill chunk (the CUDA backend's tensor-core prefill size).
inline std::unique_ptr<Model> load(const std::string& fixture, const std::string& recipe, uint32_t prefill_chunk = 256) {
    return load_recipe(fixture, recipe_for(recipe), recipe, KvDtype::Bf16, prefill_chunk);
}

inline double cosine(const std::vector<float>& a, const std::vector<float>& b, size_t off = 0, size_t n = 0) {
    if (!n) n = a.size();
    double d = 0, x = 0, y = 0;
    for (size_t i = off; i < off + n; ++i) {
        d += double(a[i]) * b[i];
        x += double(a[i]) * a[i];
        y += double(b[i]) * b[i];
    }
    return d / std::sqrt(x * y);
}

// KL(p || q) of softmax rows, nats.
inline double kl(const std::vector<float>& p_logits, const std::vector<float>& q_logits, size_t off, size_t n) {
    const double lp = log_sum_exp(std::span(p_logits).subspan(off, n));
    const double lq = log_sum_exp(std::span(q_logits).subspan(off, n));
    double s = 0;
    for (size_t i = off; i < off + n; ++i) {
        const double a = p_logits[i] - lp, b = q_logits[i] - lq;
        s += std::exp(a) * (a - b);
    }
    return s;
}

inline int32_t argmax(const std::vector<float>& v) { return int32_t(std::max_element(v.begin(), v.end()) - v.begin()); }

// A pipelining test's start: the fixture's first n perplexity ids prefilled on lane 0, its image
// (restored on the lanes under test) and the greedy first token.
struct PromptStart {
    LaneImage image;
    int32_t first = 0;
};
inline PromptStart prefill_start(Backend& backend, const std::string& fixture, size_t n) {
    const FixtureRefs refs = read_refs(fixture);
    const std::vector<int32_t> ids(refs.ppl_ids.begin(), refs.ppl_ids.begin() + long(n));
    std::vector<float> lg;
    backend.prefill(0, ids, LogitsOut::Last, &lg);
    return {backend.save_lane(0), argmax(lg)};
}

// The rows of the pipelining tests: greedy, a seeded draw, a penalised draw (its id comes from
// the host), top-p.
inline SamplingParams pipeline_row_params(int row) {
    SamplingParams p;
    if (row == 1) p.temperature = 0.8f, p.seed = 7;
    if (row == 2) p.temperature = 0.7f, p.top_k = 40, p.repetition_penalty = 1.3f, p.seed = 9;
    if (row == 3) p.temperature = 1.0f, p.top_p = 0.9f, p.seed = 11;
    return p;
}

// Two runs of the same rows on lanes 0..n-1 (ref) and offset..offset+n-1 (got): the same ids,
// logprobs and top logprobs at every step, and the lanes end with the same ids and state.
inline void check_same_runs(Backend& backend, const std::vector<std::vector<DecodeResult>>& got,
                            const std::vector<std::vector<DecodeResult>>& ref, int offset) {
    for (size_t r = 0; r < ref.size(); ++r) {
        INFO("row " << r);
        REQUIRE(got[r].size() == ref[r].size());
        for (size_t k = 0; k < ref[r].size(); ++k) {
            INFO("step " << k);
            CHECK(got[r][k].token == ref[r][k].token);
            CHECK(got[r][k].logprob == ref[r][k].logprob);
            CHECK(got[r][k].top_logprobs == ref[r][k].top_logprobs);
        }
        const LaneImage a = backend.save_lane(int(r)), b = backend.save_lane(offset + int(r));
        CHECK(a.tokens == b.tokens);
        CHECK(a.sections == b.sections);
    }
}

inline DecodeStep step(int lane, int32_t token) {
    DecodeStep s;
    s.lane = lane;
    s.token = token;
    return s;
}

// Prefills 8 lanes, then decodes `steps` greedy steps with `batch` lanes per call; returns every
// lane's logits after every step.
inline std::vector<std::vector<float>> run_lanes(Backend& b, const std::vector<std::vector<int32_t>>& prompts, int steps,
                                          int batch) {
    std::vector<int32_t> next(8);
    for (int l = 0; l < 8; ++l) {
        b.reset_lane(l);
        std::vector<float> lg;
        b.prefill(l, prompts[size_t(l)], LogitsOut::Last, &lg);
        next[size_t(l)] = argmax(lg);
    }
    std::vector<std::vector<float>> out;
    for (int s = 0; s < steps; ++s)
        for (int l0 = 0; l0 < 8; l0 += batch) {
            std::vector<DecodeStep> st;
            for (int l = l0; l < l0 + batch; ++l) st.push_back(step(l, next[size_t(l)]));
            const auto res = b.decode(st);
            for (int i = 0; i < batch; ++i) {
                next[size_t(l0 + i)] = res[size_t(i)].token;
                out.push_back(b.last_logits(l0 + i));
                CHECK(res[size_t(i)].token == argmax(out.back()));
            }
        }
    return out;
}

} // namespace ninfer::test
