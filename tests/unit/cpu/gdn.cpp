// ninfer tests - Gated DeltaNet: the chunked (WY/UT) form equals the recurrence, outputs and state.
#include "core/cpu/gdn.h"
#include "core/cpu/ops.h"
#include "tests/unit/cpu/tiny_models.h"

#include <catch2/catch.hpp>

using namespace ninfer::core;
using namespace ninfer::core::cpu;

namespace {

struct HeadInputs {
    size_t n;
    uint32_t dk, dv;
    std::vector<float> q, k, v, g, beta;
};

HeadInputs random_head(size_t n, uint32_t dk, uint32_t dv, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal;
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    HeadInputs h{n, dk, dv, {}, {}, {}, {}, {}};
    h.q.resize(n * dk);
    h.k.resize(n * dk);
    h.v.resize(n * dv);
    for (auto& x : h.q) x = normal(rng);
    for (auto& x : h.k) x = normal(rng);
    for (auto& x : h.v) x = normal(rng);
    for (size_t t = 0; t < n; ++t) {
        l2_normalize(h.q.data() + t * dk, dk);
        for (uint32_t i = 0; i < dk; ++i) h.q[t * dk + i] /= std::sqrt(float(dk));
        l2_normalize(h.k.data() + t * dk, dk);
        h.g.push_back(-softplus(normal(rng)) * unit(rng)); // log decay <= 0, some near 0
        h.beta.push_back(sigmoid(normal(rng)));
    }
    return h;
}

GdnHeadSequence view(HeadInputs& h, std::vector<float>& o) {
    o.assign(h.n * h.dv, 0.0f);
    GdnHeadSequence s;
    s.n_tokens = h.n;
    s.dk = h.dk;
    s.dv = h.dv;
    s.q = h.q.data();
    s.k = h.k.data();
    s.qk_stride = h.dk;
    s.v = h.v.data();
    s.v_stride = h.dv;
    s.g = h.g.data();
    s.beta = h.beta.data();
    s.gb_stride = 1;
    s.o = o.data();
    s.o_stride = h.dv;
    return s;
}

} // namespace

TEST_CASE("gdn: chunked form equals the recurrence (outputs and final state)", "[gdn]") {
    const uint32_t dk = 16, dv = 24;
    for (size_t n : {1u, 7u, 64u, 150u}) {
        for (size_t first : {64u, 5u}) {
            HeadInputs h = random_head(n, dk, dv, 100 + n);
            std::vector<float> S0(size_t(dk) * dv);
            std::mt19937_64 rng(7);
            std::normal_distribution<float> normal;
            for (auto& x : S0) x = 0.3f * normal(rng);
            std::vector<float> o_rec, o_chunk, S_rec = S0, S_chunk = S0;
            gdn_recurrent(view(h, o_rec), S_rec.data());
            gdn_chunked(view(h, o_chunk), S_chunk.data(), kGdnChunk, first);
            INFO("tokens " << n << ", first chunk " << first);
            CHECK(ninfer::test::relative_error(o_chunk, o_rec) < 1e-5);
            CHECK(ninfer::test::relative_error(S_chunk, S_rec) < 1e-5);
        }
    }
}

TEST_CASE("gdn: the recurrence matches a direct evaluation of the delta rule", "[gdn]") {
    // One token from a known state: S' = e^g S + k ⊗ beta (v - e^g S^T k); o = S'^T q.
    const uint32_t dk = 2, dv = 2;
    HeadInputs h{1, dk, dv, {1.0f, 0.0f}, {0.6f, 0.8f}, {1.0f, -1.0f}, {std::log(0.5f)}, {0.5f}};
    std::vector<float> S = {1.0f, 2.0f, 3.0f, 4.0f}, o;
    gdn_recurrent(view(h, o), S.data());
    // e^g S = [[0.5,1],[1.5,2]]; S^T k = [0.5*0.6+1.5*0.8, 1*0.6+2*0.8] = [1.5, 2.2]
    // delta = 0.5 * ([1,-1] - [1.5,2.2]) = [-0.25, -1.6]
    const std::vector<float> want_S = {0.5f - 0.15f, 1.0f - 0.96f, 1.5f - 0.2f, 2.0f - 1.28f};
    for (int i = 0; i < 4; ++i)
        CHECK(S[i] == Approx(want_S[i]).margin(1e-6));
    CHECK(o[0] == Approx(want_S[0]).margin(1e-6));
    CHECK(o[1] == Approx(want_S[1]).margin(1e-6));
}
