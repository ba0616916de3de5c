// ninfer GPU tests - layer-sliced prefill (Backend::prefill_begin / prefill_advance, issue 27): a
// prompt chunk enqueued a few layers at a time, with decode steps of other lanes between the
// slices, leaves its lane exactly as a whole-chunk prefill does (logits, lane image, the next
// decode, the MTP head's drafts), and the interleaved decode steps give exactly the results they
// give without the prefill between them. A lane reset mid-chunk abandons it cleanly.
#include "core/cuda/cuda_backend.h"
#include "tests/gpu/fixture_models.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/mtp_test_util.h"

#include <catch2/catch.hpp>

using namespace ninfer;
using namespace ninfer::core;
using namespace ninfer::test;

namespace {

constexpr int kDecoders = 2; // lanes 1 and 2 decode; lane 0 prefills
constexpr int kSteps = 8;    // decode steps of the decoders in every run

struct Run {
    std::vector<float> prefill_logits;          // lane 0's chunk, LogitsOut::Last
    std::vector<std::vector<DecodeResult>> steps; // every decode step's results (lanes 1, 2)
    std::vector<std::vector<float>> step_logits;  // the decoders' logits after each step
    int steps_between_slices = 0;
};

std::vector<int32_t> ids(const std::vector<int32_t>& pool, size_t from, size_t to) {
    return {pool.begin() + long(from), pool.begin() + long(to)};
}
std::vector<int32_t> ids(const FixtureRefs& refs, size_t from, size_t to) { return ids(refs.ppl_ids, from, to); }

// Lanes 1, 2 hold short prompts and decode (pipelined, as the scheduler does: step k begun, then
// step k-1 ended); lane 0 holds a first chunk and prefills a second one of chunk_len tokens whole
// (slice_layers < 0) or sliced by slice_layers layers (0: the rest at once) with one decode step
// after each slice that does not finish it. Prompt ids come from pool (164 + chunk_len of them).
Run run(Backend& b, const std::vector<int32_t>& pool, size_t chunk_len, int slice_layers) {
    Run r;
    std::vector<float> lg;
    b.prefill(1, ids(pool, 0, 40), LogitsOut::Last, &lg);
    std::vector<int32_t> first = {argmax(lg)};
    b.prefill(2, ids(pool, 40, 70), LogitsOut::Last, &lg);
    first.push_back(b.sample_after_prefill(2, pipeline_row_params(1), {}, 0).token);
    b.prefill(0, ids(pool, 100, 164), LogitsOut::None, nullptr);
    const std::vector<int32_t> chunk = ids(pool, 164, 164 + chunk_len);

    // The ids each decoder has reported; a step begun with kTokenOfLastStep leaves that id out.
    std::vector<std::vector<int32_t>> gen = {{first[0]}, {first[1]}};
    int begun = 0;
    auto decode_step = [&] {
        std::vector<DecodeStep> st;
        for (int d = 0; d < kDecoders; ++d) {
            DecodeStep s = step(1 + d, begun == 0 ? first[size_t(d)] : kTokenOfLastStep);
            s.sampling = pipeline_row_params(d == 0 ? 0 : 1);
            s.sampling.step = gen[size_t(d)].size() + (begun == 0 ? 0 : 1);
            s.generated = gen[size_t(d)];
            st.push_back(s);
        }
        b.decode_begin(st);
        if (begun++ == 0) return;
        const std::vector<DecodeResult> res = b.decode_end();
        for (int d = 0; d < kDecoders; ++d) gen[size_t(d)].push_back(res[size_t(d)].token);
        r.steps.push_back(res);
    };
    decode_step(); // a step is in flight when the prefill starts, as in serving
    if (slice_layers < 0) {
        b.prefill(0, chunk, LogitsOut::Last, &r.prefill_logits);
    } else {
        b.prefill_begin(0, chunk, LogitsOut::Last, &r.prefill_logits);
        while (!b.prefill_advance(slice_layers)) {
            CHECK(b.prefill_pending());
            decode_step();
            ++r.steps_between_slices;
        }
        CHECK_FALSE(b.prefill_pending());
    }
    while (begun < kSteps + 1) decode_step();
    r.steps.push_back(b.decode_end());
    for (int d = 0; d < kDecoders; ++d) r.step_logits.push_back(b.last_logits(1 + d));
    return r;
}

// The sliced run b against the whole run a: the chunk's logits, every decode step's results and
// the decoders' logits, bit for bit.
void check_same_run(const Run& a, const Run& b, Backend& whole, Backend& sliced) {
    REQUIRE(b.prefill_logits.size() == a.prefill_logits.size());
    CHECK(b.prefill_logits == a.prefill_logits);
    CHECK(sliced.last_logits(0) == whole.last_logits(0));
    REQUIRE(b.steps.size() == a.steps.size());
    for (size_t k = 0; k < a.steps.size(); ++k)
        for (int d = 0; d < kDecoders; ++d) {
            INFO("step " << k << " decoder " << d);
            CHECK(b.steps[k][size_t(d)].token == a.steps[k][size_t(d)].token);
            CHECK(b.steps[k][size_t(d)].logprob == a.steps[k][size_t(d)].logprob);
        }
    CHECK(b.step_logits == a.step_logits);
}

void check_same_lanes(Backend& a, Backend& b, int lanes) {
    for (int l = 0; l < lanes; ++l) {
        INFO("lane " << l);
        const LaneImage x = a.save_lane(l), y = b.save_lane(l);
        CHECK(x.tokens == y.tokens);
        CHECK(x.sections == y.sections);
    }
}

// One more step of all three lanes on both backends: the sliced lane decodes as the whole one.
void check_next_step(Backend& a, Backend& b, int32_t lane0_token) {
    std::vector<DecodeStep> st = {step(0, lane0_token), step(1, 7), step(2, 9)};
    const std::vector<DecodeResult> x = a.decode(st), y = b.decode(st);
    for (int l = 0; l < 3; ++l) {
        INFO("lane " << l);
        CHECK(x[size_t(l)].token == y[size_t(l)].token);
        CHECK(a.last_logits(l) == b.last_logits(l));
    }
}

} // namespace

TEST_CASE("cuda backend: a sliced prefill equals the whole chunk, and the decode steps between its slices equal "
          "the same steps without it", "[cuda_sliced_prefill]") {
    require_gpu();
    for (const std::string& fixture : kKernelFixtures) {
        for (const char* recipe : {"bf16", "q4"}) { // q4: every matrix dequantised into the prefill's scratch
            auto m = load(fixture, recipe);
            const FixtureRefs refs = read_refs(fixture);
            for (const int slice_layers : {1, 2, 0}) {
                INFO(fixture << " " << recipe << " slice_layers " << slice_layers);
                const uint32_t layers = m->weights.config.num_hidden_layers;
                auto whole = make_cuda_backend(m->weights, m->plan);
                auto sliced = make_cuda_backend(m->weights, m->plan);
                const Run a = run(*whole, refs.ppl_ids, 92, -1);
                const Run b = run(*sliced, refs.ppl_ids, 92, slice_layers);
                const int slices = slice_layers == 0 ? 1 : int((layers + uint32_t(slice_layers) - 1) / uint32_t(slice_layers));
                CHECK(b.steps_between_slices == slices - 1);
                check_same_run(a, b, *whole, *sliced);
                check_same_lanes(*whole, *sliced, 3);
                check_next_step(*whole, *sliced, argmax(a.prefill_logits));
            }
        }
    }
}

TEST_CASE("cuda backend: resetting the lane of a sliced prefill abandons it; short chunks run whole",
          "[cuda_sliced_prefill]") {
    require_gpu();
    for (const std::string& fixture : kKernelFixtures) {
        INFO(fixture);
        auto m = load(fixture, "bf16");
        const FixtureRefs refs = read_refs(fixture);
        auto ref = make_cuda_backend(m->weights, m->plan);
        auto gpu = make_cuda_backend(m->weights, m->plan);
        std::vector<float> want, got;
        ref->prefill(3, ids(refs, 0, 112), LogitsOut::None, nullptr);
        ref->prefill(3, ids(refs, 112, 120), LogitsOut::Last, &want);

        // Abandoned after two of its layers, with a decode step of another lane in between.
        gpu->prefill(1, ids(refs, 200, 230), LogitsOut::None, nullptr);
        gpu->prefill_begin(3, ids(refs, 0, 120), LogitsOut::Last, &got);
        REQUIRE_FALSE(gpu->prefill_advance(1));
        gpu->decode(std::vector<DecodeStep>{step(1, 5)});
        REQUIRE_FALSE(gpu->prefill_advance(1));
        CHECK_THROWS(gpu->decode(std::vector<DecodeStep>{step(3, 5)})); // the prefilling lane may not decode
        CHECK_THROWS(gpu->prefill(2, ids(refs, 0, 20), LogitsOut::None, nullptr)); // one prefill at a time
        gpu->reset_lane(3);
        CHECK_FALSE(gpu->prefill_pending());
        CHECK(gpu->lane_length(3) == 0);

        // The lane prefilled again, in slices, ends as the reference; a short chunk runs whole.
        gpu->prefill_begin(3, ids(refs, 0, 112), LogitsOut::None, nullptr);
        while (!gpu->prefill_advance(2)) gpu->decode(std::vector<DecodeStep>{step(1, 6)});
        gpu->prefill_begin(3, ids(refs, 112, 120), LogitsOut::Last, &got);
        CHECK_FALSE(gpu->prefill_pending());
        CHECK(gpu->prefill_advance(1));
        CHECK(got == want);
        const LaneImage x = ref->save_lane(3), y = gpu->save_lane(3);
        CHECK(x.tokens == y.tokens);
        CHECK(x.sections == y.sections);
    }
}

TEST_CASE("cuda backend: a sliced prefill feeds the MTP head as the whole chunk does", "[cuda_sliced_prefill]") {
    require_gpu();
    for (const std::string& fixture : kKernelFixtures) {
        INFO(fixture);
        // Random weights with a head, prefill chunks of 64 (the sliced chunk: 60 tokens, one pass).
        auto h = make_heads(fixture, TensorFormat::Bf16, false, 97);
        auto sliced = make_cuda_backend(h->weights, h->plan);
        const std::vector<int32_t> pool = random_tokens(224, h->weights.config.vocab_size, 98);
        const Run a = run(*h->gpu, pool, 60, -1);
        const Run b = run(*sliced, pool, 60, 1);
        CHECK(b.steps_between_slices == int(h->weights.config.num_hidden_layers) - 1);
        check_same_run(a, b, *h->gpu, *sliced);
        check_same_lanes(*h->gpu, *sliced, 3); // the images carry the head's K/V (MtpKv)
        const std::vector<DraftRequest> request = {{0, argmax(a.prefill_logits), int(kDrafts)}};
        const Drafts x = draft(*h->gpu, request), y = draft(*sliced, request);
        REQUIRE(x.ids[0].size() == kDrafts);
        CHECK(y.ids == x.ids);
        CHECK(y.logits == x.logits);
    }
}
