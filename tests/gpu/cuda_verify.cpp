// ninfer tests (GPU) - the CUDA backend's verify step and rollback (issue 28): every row of a
// K + 1-token window equals the one-token decode step of the same lane (bit for bit, or the
// near-tie rule of speculative_util.h), and keeping the first n tokens leaves the lane exactly as a
// twin lane that decoded those n tokens: the same image (KV rows, GDN conv history and recurrent
// state), the same last logits (sampled as the bonus token) and the same next step. Both kernel
// fixtures, q4 through graphs and eagerly, bf16 in the f32-activation mode; K = 1..5; several
// lanes' windows in one forward (token-major rows) and in several.
#include "core/cuda/cuda_backend.h"
#include "tests/gpu/fixture_models.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/speculative_util.h"

#include <cstdio>
#include <cstring>

using namespace ninfer::core;
using namespace ninfer::test;

namespace {

std::vector<std::vector<float>> decode_each(Backend& b, int lane, std::span<const int32_t> tokens) {
    std::vector<std::vector<float>> out;
    for (int32_t t : tokens) {
        const DecodeStep s = step(lane, t);
        b.decode(std::span(&s, 1));
        out.push_back(b.last_logits(lane));
    }
    return out;
}

struct Mode {
    const char* name;
    const char* recipe;
    CudaBackendOptions options;
};

std::vector<Mode> modes() {
    CudaBackendOptions eager, f32;
    eager.graphs = false;
    f32.f32_activations = true;
    return {{"q4 graphs", "q4", {}}, {"q4 eager", "q4", eager}, {"bf16 f32-activations", "bf16", f32}};
}

// The GDN section as floats (f32 conv history and state in the image layout).
std::vector<float> gdn_floats(const LaneImage& image) {
    std::vector<float> f(image.gdn().size() / 4);
    std::memcpy(f.data(), image.gdn().data(), f.size() * 4);
    return f;
}

} // namespace

TEST_CASE("cuda_verify: window rows equal decode steps; keeping n equals a twin that decoded n", "[cuda_verify]") {
    require_gpu();
    for (const std::string& fixture : kKernelFixtures) {
        for (const Mode& mode : modes()) {
            INFO(fixture << " " << mode.name);
            auto m = load(fixture, mode.recipe);
            const MemoryPlan plan = spec_plan(*m, kMaxDraftTokens);
            auto gpu = make_cuda_backend(m->weights, plan, mode.options);
            const FixtureRefs refs = read_refs(fixture);
            // 62 prompt tokens: a window of 3 or more crosses the 64-token KV page.
            const std::vector<int32_t> prompt(refs.ppl_ids.begin(), refs.ppl_ids.begin() + 62);
            gpu->prefill(0, prompt, LogitsOut::Last, nullptr);
            const LaneImage start = gpu->save_lane(0);
            RowTally rows, images;
            for (uint32_t K = 1; K <= kMaxDraftTokens; ++K) {
                const std::vector<int32_t> window(refs.ppl_ids.begin() + 62 + 7 * K,
                                                  refs.ppl_ids.begin() + 62 + 7 * K + K + 1);
                // (a) verify's rows against plain one-token steps on a twin lane.
                gpu->restore_lane(0, start);
                gpu->restore_lane(1, start);
                std::vector<float> got;
                gpu->verify(std::vector<VerifyStep>{{0, window}}, got);
                const size_t V = gpu->vocab_size();
                REQUIRE(got.size() == window.size() * V);
                CHECK(gpu->lane_length(0) == prompt.size() + window.size());
                const auto ref = decode_each(*gpu, 1, window);
                for (size_t j = 0; j < window.size(); ++j) {
                    INFO("K " << K << " row " << j);
                    same_or_near_tie(std::vector<float>(got.begin() + long(j * V), got.begin() + long((j + 1) * V)),
                                     ref[j], rows);
                }
                CHECK(gpu->last_logits(0) == std::vector<float>(got.end() - long(V), got.end()));
                // (b) every keep: the lane equals a twin that decoded the kept tokens.
                for (uint32_t keep = 1; keep <= K + 1; ++keep) {
                    INFO("K " << K << " keep " << keep);
                    gpu->restore_lane(0, start);
                    gpu->restore_lane(1, start);
                    std::vector<float> rows_now;
                    gpu->verify(std::vector<VerifyStep>{{0, window}}, rows_now);
                    gpu->accept_verified(0, keep);
                    decode_each(*gpu, 1, std::span(window).first(keep));
                    CHECK(gpu->lane_length(0) == prompt.size() + keep);
                    same_or_near_tie(gpu->last_logits(0), gpu->last_logits(1), images);
                    const bool exact_rows = gpu->last_logits(0) == gpu->last_logits(1);
                    // The bonus token: the GPU sampler over the kept row, as after a prefill.
                    const DecodeResult bonus = gpu->sample_after_prefill(0, {}, {}, 0);
                    CHECK(bonus.token == argmax(gpu->last_logits(1)));
                    const LaneImage a = gpu->save_lane(0), b = gpu->save_lane(1);
                    CHECK(a.tokens == b.tokens);
                    if (exact_rows) {
                        CHECK(a.kv().size() == b.kv().size());
                        CHECK(std::equal(a.kv().begin(), a.kv().end(), b.kv().begin(), b.kv().end()));
                        CHECK(a.gdn().size() == b.gdn().size());
                        CHECK(std::equal(a.gdn().begin(), a.gdn().end(), b.gdn().begin(), b.gdn().end()));
                    } else {
                        CHECK(cosine(gdn_floats(a), gdn_floats(b)) >= 0.9999);
                    }
                    // Both go on alike: nothing of the dropped tokens is left behind.
                    const DecodeStep s0 = step(0, bonus.token), s1 = step(1, bonus.token);
                    gpu->decode(std::span(&s0, 1));
                    gpu->decode(std::span(&s1, 1));
                    same_or_near_tie(gpu->last_logits(0), gpu->last_logits(1), images);
                    if (exact_rows) CHECK(gpu->last_logits(0) == gpu->last_logits(1));
                }
            }
            std::printf("RESULT %s %s verify_rows_bit_differing %zu of %zu kept_lane_rows_bit_differing %zu of %zu\n",
                        fixture.c_str(), mode.name, rows.differing, rows.rows, images.differing, images.rows);
        }
    }
}

TEST_CASE("cuda_verify: several lanes in one verify, windows close on the lane's next change", "[cuda_verify]") {
    require_gpu();
    const std::string fixture = kKernelFixtures[1];
    auto m = load(fixture, "q4");
    auto gpu = make_cuda_backend(m->weights, spec_plan(*m, 3));
    const FixtureRefs refs = read_refs(fixture);
    const size_t V = gpu->vocab_size();
    // Lanes 0, 2, 5 verify windows of 4, 1 and 3 tokens in one call; lanes 1, 3, 6 decode the same
    // tokens one at a time.
    const int spec_lanes[3] = {0, 2, 5}, twin_lanes[3] = {1, 3, 6};
    const size_t sizes[3] = {4, 1, 3};
    std::vector<std::vector<int32_t>> windows(3);
    std::vector<VerifyStep> steps;
    for (int i = 0; i < 3; ++i) {
        const std::vector<int32_t> prompt(refs.ppl_ids.begin() + 11 * i, refs.ppl_ids.begin() + 11 * i + 40 + 13 * i);
        gpu->prefill(spec_lanes[i], prompt, LogitsOut::Last, nullptr);
        gpu->restore_lane(twin_lanes[i], gpu->save_lane(spec_lanes[i]));
        windows[size_t(i)].assign(refs.ppl_ids.begin() + 100 + i, refs.ppl_ids.begin() + 100 + i + long(sizes[i]));
        steps.push_back({spec_lanes[i], windows[size_t(i)]});
    }
    std::vector<float> got;
    gpu->verify(steps, got);
    REQUIRE(got.size() == 8 * V);
    RowTally rows;
    size_t row = 0;
    for (int i = 0; i < 3; ++i) {
        INFO("lane " << spec_lanes[i]);
        for (const auto& ref : decode_each(*gpu, twin_lanes[i], windows[size_t(i)]))
            same_or_near_tie(std::vector<float>(got.begin() + long(row * V), got.begin() + long((row + 1) * V)), ref, rows),
                ++row;
    }
    std::printf("RESULT %s three_lanes_verify_rows_bit_differing %zu of %zu\n", fixture.c_str(), rows.differing,
                rows.rows);
    // Keep 2 of lane 0's 4; lane 5 decodes on (its window closes, keeping all 3).
    gpu->accept_verified(0, 2);
    const DecodeStep s = step(5, 7);
    gpu->decode(std::span(&s, 1));
    CHECK_THROWS_WITH(gpu->accept_verified(5, 1), Catch::Contains("no open verify window"));
    CHECK(gpu->lane_length(5) == gpu->lane_length(6) + 1);
    // Lane 0's accepted window may still keep fewer (backend.h), never more than the 2 it kept.
    CHECK_THROWS_WITH(gpu->accept_verified(0, 3), Catch::Contains("keep 3 of a 2-token verify window"));
    CHECK_THROWS_WITH(gpu->accept_verified(2, 2), Catch::Contains("keep 2 of a 1-token verify window"));
    gpu->accept_verified(2, 1);
    // Bad input: too many tokens for the plan's K, a lane twice, an id outside the vocabulary.
    const std::vector<int32_t> five(5, 1), one(1, 1), bad(1, int32_t(V));
    CHECK_THROWS_WITH(gpu->verify(std::vector<VerifyStep>{{0, five}}, got), Catch::Contains("the plan allows 1..4"));
    CHECK_THROWS_WITH(gpu->verify(std::vector<VerifyStep>{{0, one}, {0, one}}, got), Catch::Contains("appears twice"));
    CHECK_THROWS_WITH(gpu->verify(std::vector<VerifyStep>{{0, bad}}, got), Catch::Contains("outside the vocabulary"));
    // Without verify windows in the plan the backend refuses plainly.
    auto plain = make_cuda_backend(m->weights, m->plan);
    plain->prefill(0, windows[0], LogitsOut::Last, nullptr);
    CHECK_THROWS_WITH(plain->verify(std::vector<VerifyStep>{{0, one}}, got), Catch::Contains("does not verify drafts"));
}

// More rows than one forward takes (4 windows of 3: two forwards of 6), eagerly and through graphs:
// every row still equals the one-token decode step, and a keep of 2 leaves each lane as its twin.
TEST_CASE("cuda_verify: windows split over several forwards, eager and graphs", "[cuda_verify]") {
    require_gpu();
    const std::string fixture = kKernelFixtures[0];
    auto m = load(fixture, "q4");
    const FixtureRefs refs = read_refs(fixture);
    for (bool graphs : {false, true}) {
        INFO((graphs ? "graphs" : "eager"));
        CudaBackendOptions options;
        options.graphs = graphs;
        auto gpu = make_cuda_backend(m->weights, spec_plan(*m, 2), options);
        const size_t V = gpu->vocab_size();
        std::vector<std::vector<int32_t>> windows(4);
        std::vector<VerifyStep> steps;
        for (int i = 0; i < 4; ++i) {
            const std::vector<int32_t> prompt(refs.ppl_ids.begin() + 5 * i, refs.ppl_ids.begin() + 5 * i + 9 + 20 * i);
            gpu->prefill(i, prompt, LogitsOut::Last, nullptr);
            gpu->restore_lane(4 + i, gpu->save_lane(i));
            windows[size_t(i)].assign(refs.ppl_ids.begin() + 120 + 3 * i, refs.ppl_ids.begin() + 123 + 3 * i);
            steps.push_back({i, windows[size_t(i)]});
        }
        std::vector<float> got;
        gpu->verify(steps, got);
        REQUIRE(got.size() == 12 * V);
        RowTally rows;
        for (int i = 0; i < 4; ++i) {
            const auto ref = decode_each(*gpu, 4 + i, std::span(windows[size_t(i)]).first(2));
            for (size_t j = 0; j < 2; ++j)
                same_or_near_tie(std::vector<float>(got.begin() + long((3 * i + j) * V), got.begin() + long((3 * i + j + 1) * V)),
                                 ref[j], rows);
            gpu->accept_verified(i, 2);
            CHECK(gpu->last_logits(i) == gpu->last_logits(4 + i));
            const LaneImage a = gpu->save_lane(i), b = gpu->save_lane(4 + i);
            CHECK(a.tokens == b.tokens);
            CHECK(a.sections == b.sections);
        }
        std::printf("RESULT %s %s four_windows_of_3_rows_bit_differing %zu of %zu\n", fixture.c_str(),
                    graphs ? "graphs" : "eager", rows.differing, rows.rows);
    }
}
