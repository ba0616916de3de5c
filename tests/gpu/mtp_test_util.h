// ninfer tests (GPU) - the MTP head tests' helpers (cuda_mtp.cpp, cuda_mtp_images.cpp): a CPU and a
// CUDA backend over the same random weights with an MTP head (the kernel fixtures' shapes), drafts
// with their logits, and the GPU-vs-CPU draft comparison with the text path's bounds.
//
// Contract: make_heads(fixture, format, f32, seed, kv) builds both backends (4 lanes of 512 tokens,
// K = kDrafts, prefill chunks of 64); check_close(gpu, cpu, i, k, V, bounds, worst) checks request
// i's drafts (cosine, KL, ids while the CPU's top-2 gap is above the rule) and keeps the worst
// figures and the KL sum, which Worst::report prints as RESULT lines (Worst::check_mean checks a
// mode's mean KL); kModes are the activation modes and weight formats with their bounds;
// check_routes_hold(weights, plan, prompt, next_token, drafts) checks on the CPU that a MoE
// prompt's routes and its drafts' are far enough from ties for the f32 check mode's comparison.
#pragma once

#include "core/convert/hf_source.h"
#include "core/cpu/cpu_backend.h"
#include "core/cuda/cuda_backend.h"
#include "core/model/random_model.h"
#include "tests/gpu/fixture_models.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/unit/cpu/route_margins.h"
#include "tests/unit/cpu/tiny_models.h" // random_tokens

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>

namespace ninfer::test {

using namespace ninfer::core;

inline constexpr uint32_t kDrafts = 4;

// The committed fixture's shape (its config.json; the weights here are random).
inline ModelConfig fixture_config(const std::string& fixture) {
    return read_hf_source(kFixtureRoot + fixture + "/hf", "").config;
}

// A plan for weights with the MTP head: `lanes` lanes of 512 tokens in kv_dtype, prefill chunks of
// 64 tokens, K = `drafts` verify windows and the head's KV.
inline MemoryPlan mtp_plan(const ModelConfig& config, const ModelWeights& weights, int lanes, KvDtype kv_dtype,
                           uint32_t drafts) {
    MemoryRequest r;
    r.max_context = 512;
    r.max_concurrency = lanes;
    r.kv_dtype = kv_dtype;
    r.prefill_chunk = 64;
    r.available_bytes = 1ull << 34;
    r.weight_bytes = weights.stored_bytes();
    r.max_draft_tokens = drafts;
    r.mtp = true;
    return MemoryPlan::make(config, r);
}

struct Heads {
    std::unique_ptr<InMemoryModel> model;
    ModelWeights weights;
    MemoryPlan plan;
    std::unique_ptr<Backend> cpu, gpu;
};

// The fixture's shape with random weights and an MTP head; 4 lanes of 512 tokens, the same KV dtype
// on both backends, prefill chunks of 64 tokens (so a 150-token prompt is three tensor-core chunks).
inline std::unique_ptr<Heads> make_heads(const std::string& fixture, TensorFormat format, bool f32_activations,
                                         uint64_t seed, KvDtype kv_dtype = KvDtype::Bf16) {
    const ModelConfig config = fixture_config(fixture);
    auto h = std::make_unique<Heads>();
    RandomModelOptions o;
    o.seed = seed;
    o.matrix_format = format;
    o.with_mtp = true;
    h->model = InMemoryModel::random(config, o);
    h->weights = h->model->weights();
    REQUIRE(h->weights.mtp);
    h->plan = mtp_plan(config, h->weights, 4, kv_dtype, kDrafts);
    h->cpu = make_cpu_backend(h->weights, h->plan);
    CudaBackendOptions co;
    co.f32_activations = f32_activations;
    h->gpu = make_cuda_backend(h->weights, h->plan, co);
    REQUIRE(h->gpu->has_mtp());
    return h;
}

struct Drafts {
    std::vector<std::vector<int32_t>> ids;
    std::vector<std::vector<float>> logits;
};

inline Drafts draft(Backend& b, const std::vector<DraftRequest>& requests) {
    Drafts d;
    d.ids = b.draft_mtp(requests, &d.logits);
    return d;
}

// The largest logit minus the second largest.
inline double top2_gap(const std::vector<float>& v, size_t off, size_t n) {
    float a = -INFINITY, b = -INFINITY;
    for (size_t i = off; i < off + n; ++i) {
        if (v[i] > a) {
            b = a;
            a = v[i];
        } else if (v[i] > b) {
            b = v[i];
        }
    }
    return double(a) - double(b);
}

inline int32_t argmax_row(const std::vector<float>& v, size_t off, size_t n) {
    return int32_t(std::max_element(v.begin() + long(off), v.begin() + long(off + n)) - (v.begin() + long(off)));
}

// What a draft row of the GPU must keep to the CPU's: cosine >= cos; KL(cpu || gpu) <= kl (0: not
// checked); the same id while the CPU's top-2 gap is above gap, or gap_scale x the row's largest
// |logit| when gap_scale > 0 (the real widths' synthetic weights give logits in the hundreds).
// mean_kl (0: not checked): the mean KL over a test case's rows of one mode (Worst::check_mean).
struct Bounds {
    double cos = 0.999, gap = 0.01, gap_scale = 0, kl = 0, mean_kl = 0;
    // The ids may differ wherever the row itself is within cos and kl: q4 weights run W4A8 on the
    // GPU (int8 activations) against the CPU's f32 activations, so an argmax moves wherever the
    // row moves that far (measured: a MoE draft row at cosine 0.9936 after two images picked 155
    // where the CPU picked 23). Exactness is shown GPU against GPU (speculative == plain decoding).
    bool id_flips = false;
};

// Worst figures of a test case, printed as RESULT lines for the run's log; the KL sum for the mean.
struct Worst {
    double cos = 1, kl = 0, kl_sum = 0;
    size_t rows = 0, id_flips = 0;
    double mean_kl() const { return rows ? kl_sum / double(rows) : 0; }
    void check_mean(const Bounds& b) const {
        if (b.mean_kl > 0)
            CHECK(mean_kl() <= b.mean_kl);
    }
    void report(const std::string& what) const {
        std::printf("RESULT cuda_mtp %s worst_cosine %.7f max_kl %.3e mean_kl %.3e rows %zu id_flips %zu\n",
                    what.c_str(), cos, kl, mean_kl(), rows, id_flips);
        WARN(what << ": worst cosine " << cos << ", max KL " << kl << ", mean KL " << mean_kl());
    }
};

// Request i's drafts, GPU vs CPU, within b; the GPU's ids are the argmax of its own rows. A draft
// fed back from a near tie may differ from there on, so later rows are compared only up to the
// first row under the gap rule (or with different ids).
inline void check_close(const Drafts& gpu, const Drafts& cpu, size_t i, int k_want, uint32_t V, const Bounds& b,
                 Worst& worst) {
    REQUIRE(cpu.ids[i].size() == size_t(k_want));
    REQUIRE(gpu.ids[i].size() == size_t(k_want));
    REQUIRE(gpu.logits[i].size() == size_t(k_want) * V);
    REQUIRE(cpu.logits[i].size() == size_t(k_want) * V);
    for (int j = 0; j < k_want; ++j) {
        INFO("draft " << j);
        const size_t off = size_t(j) * V;
        CHECK(gpu.ids[i][size_t(j)] == argmax_row(gpu.logits[i], off, V));
        const double c = cosine(gpu.logits[i], cpu.logits[i], off, V), d = kl(cpu.logits[i], gpu.logits[i], off, V);
        worst.cos = std::min(worst.cos, c);
        worst.kl = std::max(worst.kl, d);
        worst.kl_sum += d;
        ++worst.rows;
        CHECK(c >= b.cos);
        if (b.kl > 0)
            CHECK(d <= b.kl);
        double gap_rule = b.gap;
        if (b.gap_scale > 0) {
            const auto [lo, hi] = std::minmax_element(cpu.logits[i].begin() + long(off), cpu.logits[i].begin() + long(off + V));
            gap_rule = b.gap_scale * std::max(std::fabs(double(*lo)), std::fabs(double(*hi)));
        }
        if (top2_gap(cpu.logits[i], off, V) <= gap_rule)
            break; // a near tie: the next draft may take another token
        if (!b.id_flips)
            CHECK(gpu.ids[i][size_t(j)] == cpu.ids[i][size_t(j)]);
        if (gpu.ids[i][size_t(j)] != cpu.ids[i][size_t(j)]) {
            ++worst.id_flips;
            break; // the next draft is fed another token
        }
    }
}

// What the f32 check mode's comparison with the CPU relies on for a MoE prompt and its drafts (a
// dense model has no routes), checked on the CPU. A turned route of the last token moves its row,
// the drafts' input, to cosine ~0.998 (cuda_mtp_diag.cpp), and one of a draft's own row moves that
// draft, so those routes' k-th and (k+1)-th router logits must be at least 1e-3 apart: 4x the
// largest router-logit difference between two f32 orders of the same forward on the CPU (chunked
// vs recurrent GDN over the prefills case's prompts: 2.5e-4, where a bf16 KV row rounds to the
// other neighbour; 1e-6 before the first attention layer). Earlier tokens' near ties (main layers
// or the head's rows of the prompt) may turn: each one under 1e-3 is swapped on the CPU and must
// leave the last logits and every draft at cosine >= 0.99995, half the f32 bound's budget
// (measured >= 0.99998 over the prefills case's: attention and GDN dilute one earlier row).
inline void check_routes_hold(const ModelWeights& w, const MemoryPlan& plan, const std::vector<int32_t>& prompt,
                              int32_t next_token, int drafts) {
    const PromptRun base = run_prompt(w, plan, prompt, {}, {}, next_token, drafts);
    if (base.routes.empty())
        return;
    const uint32_t V = w.config.vocab_size;
    const size_t last = prompt.size() - 1;
    for (const RouteMargin& x : route_margins(base.routes, w.config.num_experts_per_tok)) {
        const bool head = x.layer == w.config.num_hidden_layers;
        // The last token's main routes, the first draft's head route (the prompt record's last row)
        // and each later draft's (one-row records).
        const bool direct = x.rows == 1 || x.row == last;
        INFO((head ? "head" : "main") << " route of record " << x.record << ", row " << x.row << ", layer "
                                      << x.layer << ": experts " << x.expert_k << " / " << x.expert_next
                                      << ", gap " << x.gap);
        if (direct) {
            CHECK(x.gap >= 1e-3);
        } else if (x.gap < 1e-3) {
            const PromptRun swapped = run_prompt(w, plan, prompt, swap_route(x, w.config.num_experts), {},
                                                 next_token, drafts);
            CHECK(cosine(swapped.last_logits, base.last_logits) >= 0.99995);
            for (int j = 0; j < drafts; ++j)
                CHECK(cosine(swapped.draft_logits, base.draft_logits, size_t(j) * V, V) >= 0.99995);
        }
    }
}

// The text path's bounds (tests/gpu/cuda_backend.cpp): the f32-activation check mode follows the
// CPU to cosine 0.9999 and greedy over gaps of 0.01; the serving path (bf16 activations) holds
// 0.999 dense but only 0.995 on the MoE fixture, whose random router's near ties flip under bf16
// rows (a flipped route moves a row to cosine ~0.999, measured down to 0.9974 on the text path),
// greedy over gaps of 0.1; q4 weights also take int8 activations (W4A8), which the text path
// bounds by the mean KL over its rows, 1e-2 against the CPU on the same weights ("fp8 and q4
// weights stay within mean-KL bounds"), and so does this test: cosine 0.99 and the gap rule per
// row, mean KL 1e-2 over a case's rows. Not a KL bound per row: the int8 activations move every
// projection's output by ~1e-3 relative, so a route whose top-8 margin is that small flips, and
// these random weights have such routes (on the CPU, over the prefills case's prompts: margins
// down to 3e-6 in the main layers, 1.5e-5 in the head); one flipped route takes a draft row to KL
// 0.02-0.04 at cosine >= 0.995 (GPU runs of 63d070f and 6fa6480, MoE q4: 0.040 in the prefills
// case, 0.023 in the decodes case, against 0.0012 and less dense). The prefills case's 0.040 row
// is the 8-token prompt whose f32 check also failed (0.99872): its last token's layer-2 route is
// 2.3e-3 from a tie, and the f32 mode then took the q/k norms, GDN norm and conv taps in bf16,
// which these random weights' values are not, enough to turn it (cuda_mtp_diag.cpp); the f32
// kernels now take every vector in f32, and check_routes_hold keeps the prompts' margins honest.
struct Mode {
    const char* name;
    TensorFormat format;
    bool f32;
    Bounds dense, moe;
    const Bounds& bounds(const std::string& fixture) const { return fixture == "kernel/moe" ? moe : dense; }
};
inline const Mode kModes[] = {
    {"f32 check mode, bf16 weights", TensorFormat::Bf16, true, {0.9999, 0.01}, {0.9999, 0.01}},
    {"serving, bf16 weights", TensorFormat::Bf16, false, {0.999, 0.1}, {0.995, 0.1}},
    {"serving, q4 weights", TensorFormat::Q4G64Fp16, false, {0.99, 0.3, 0, 0, 1e-2, true},
     {0.99, 0.3, 0, 0, 1e-2, true}}};

} // namespace ninfer::test
