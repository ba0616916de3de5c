// ninfer tests (GPU) - the speculative round's device helpers (kernels/spec_round.h) and the CUDA
// backend's verify_greedy (issue 28): kernels::argmax_rows picks exactly as argmax_token (ties to
// the lower id, a NaN first value, NaNs elsewhere, -inf rows, vocabularies smaller and larger than
// its chunks, twice on one workspace); copy_spans / copy_span_table copy every byte, aligned or
// not; verify_greedy's ids equal the host's picks of the very rows verify gives, greedy acceptance
// from them equals accept_drafts on those rows (all accepted, none, in between), lanes that do not
// ask for rows get none, and a keep after it leaves the kept row as the lane's logits.
#include "core/backend/speculative.h"
#include "core/cuda/cuda_backend.h"
#include "ninfer/kernels/spec_round.h"
#include "tests/gpu/fixture_models.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/speculative_util.h"

#include <cmath>
#include <random>

using namespace ninfer;
using namespace ninfer::core;
using namespace ninfer::test;

TEST_CASE("cuda_verify: argmax_rows picks as argmax_token", "[cuda_verify]") {
    require_gpu();
    std::mt19937_64 rng(3);
    void* work = nullptr;
    CUDA_OK(cudaMalloc(&work, kernels::argmax_work_bytes(kernels::kArgmaxMaxRows)));
    CUDA_OK(cudaMemset(work, 0, kernels::argmax_work_bytes(kernels::kArgmaxMaxRows)));
    int32_t* out = nullptr;
    CUDA_OK(cudaMalloc(&out, kernels::kArgmaxMaxRows * 4));
    struct Shape {
        int vocab, rows;
        int64_t stride;
    };
    for (const Shape sh : {Shape{1, 3, 1}, {5, 6, 8}, {63, 4, 64}, {64, 5, 64}, {65, 2, 80}, {1000, 64, 1000},
                           {248320, 6, 248320 + 64}}) {
        for (int pass = 0; pass < 2; ++pass) { // the second pass reuses the workspace's counters
            INFO("vocab " << sh.vocab << " rows " << sh.rows << " pass " << pass);
            std::vector<float> host(size_t(sh.rows) * size_t(sh.stride), 1e30f); // padding never read
            std::uniform_int_distribution<int> small(-3, 3), at(0, sh.vocab - 1);
            for (int r = 0; r < sh.rows; ++r) {
                float* row = host.data() + size_t(r) * size_t(sh.stride);
                for (int i = 0; i < sh.vocab; ++i)
                    row[i] = (r + pass) % 2 ? float(small(rng)) : std::normal_distribution<float>(0, 2)(rng);
                switch (r % 6) {
                case 1: row[0] = std::nanf(""); break; // a NaN first value is the pick
                case 2: row[at(rng)] = std::nanf(""); break;
                case 3: for (int i = 0; i < sh.vocab; ++i) row[i] = -INFINITY; break;
                case 4: row[at(rng)] = 9.f, row[at(rng)] = 9.f, row[sh.vocab - 1] = 9.f; break; // ties across chunks
                default: break;
                }
            }
            DeviceBuffer<float> dev(host.size());
            CUDA_OK(cudaMemcpy(dev.get(), host.data(), host.size() * 4, cudaMemcpyHostToDevice));
            CUDA_OK(kernels::argmax_rows(dev.get(), sh.stride, sh.rows, sh.vocab, work, out, nullptr));
            std::vector<int32_t> got(size_t(sh.rows));
            CUDA_OK(cudaMemcpy(got.data(), out, got.size() * 4, cudaMemcpyDeviceToHost));
            for (int r = 0; r < sh.rows; ++r) {
                INFO("row " << r);
                CHECK(got[size_t(r)] ==
                      argmax_token(std::span(host).subspan(size_t(r) * size_t(sh.stride), size_t(sh.vocab))));
            }
        }
    }
    CHECK(kernels::argmax_rows(nullptr, 4, 1, 4, work, out, nullptr) == cudaErrorInvalidValue);
    CHECK(kernels::argmax_rows(reinterpret_cast<float*>(work), 3, 1, 4, work, out, nullptr) == cudaErrorInvalidValue);
    CHECK(kernels::argmax_rows(reinterpret_cast<float*>(work), 4, kernels::kArgmaxMaxRows + 1, 4, work, out, nullptr) ==
          cudaErrorInvalidValue);
    CUDA_OK(cudaFree(work));
    CUDA_OK(cudaFree(out));
}

TEST_CASE("cuda_verify: copy_spans and copy_span_table copy every byte", "[cuda_verify]") {
    require_gpu();
    std::mt19937_64 rng(4);
    const size_t n = 1 << 20;
    std::vector<uint8_t> src(n);
    for (auto& b : src) b = uint8_t(rng());
    DeviceBuffer<uint8_t> s(n), d(n, 0);
    CUDA_OK(cudaMemcpy(s.get(), src.data(), n, cudaMemcpyHostToDevice));
    // Aligned and unaligned spans of many sizes, into disjoint places of d.
    std::vector<kernels::CopySpan> spans;
    std::vector<std::pair<size_t, size_t>> where; // (dst offset, src offset, size) checked below
    std::vector<size_t> sizes;
    size_t at = 0;
    for (size_t size : {size_t(16), size_t(1), size_t(4096), size_t(70000), size_t(333), size_t(0), size_t(200000)}) {
        const size_t from = (at * 7 + 3 * size) % (n - size - 1);
        spans.push_back({d.get() + at, s.get() + from, size});
        where.push_back({at, from});
        sizes.push_back(size);
        at += size + 5;
    }
    CUDA_OK(kernels::copy_spans(spans.data(), int(spans.size() / 2), nullptr));
    kernels::CopySpan* table = nullptr;
    const size_t rest = spans.size() - spans.size() / 2;
    CUDA_OK(cudaMalloc(&table, rest * sizeof(kernels::CopySpan)));
    CUDA_OK(cudaMemcpy(table, spans.data() + spans.size() / 2, rest * sizeof(kernels::CopySpan), cudaMemcpyHostToDevice));
    CUDA_OK(kernels::copy_span_table(table, int(rest), 200000, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    const std::vector<uint8_t> got = d.download();
    std::vector<uint8_t> want(n, 0);
    for (size_t i = 0; i < spans.size(); ++i)
        std::copy(src.begin() + long(where[i].second), src.begin() + long(where[i].second + sizes[i]),
                  want.begin() + long(where[i].first));
    CHECK(got == want);
    CHECK(d.guards_intact());
    CHECK(kernels::copy_spans(spans.data(), kernels::kCopySpansMax + 1, nullptr) == cudaErrorInvalidValue);
    CUDA_OK(cudaFree(table));
}

TEST_CASE("cuda_verify: verify_greedy's ids are the host's picks of verify's rows; acceptance from them equals "
          "accept_drafts",
          "[cuda_verify]") {
    require_gpu();
    const std::string fixture = kKernelFixtures[0]; // dense (cuda_verify's several-lane case is the MoE one)
    auto m = load(fixture, "q4");
    auto gpu = make_cuda_backend(m->weights, spec_plan(*m, 3));
    const FixtureRefs refs = read_refs(fixture);
    const size_t V = gpu->vocab_size();
    std::vector<LaneImage> start;
    for (int lane = 0; lane < 2; ++lane) {
        const std::vector<int32_t> prompt(refs.ppl_ids.begin() + 9 * lane, refs.ppl_ids.begin() + 9 * lane + 50);
        gpu->prefill(lane, prompt, LogitsOut::Last, nullptr);
        start.push_back(gpu->save_lane(lane));
    }
    const std::vector<int32_t> w0(refs.ppl_ids.begin() + 60, refs.ppl_ids.begin() + 64), w1(refs.ppl_ids.begin() + 70,
                                                                                          refs.ppl_ids.begin() + 73);
    const std::vector<VerifyStep> steps{{0, w0}, {1, w1}};
    // Both lanes' rows and ids in one call: the ids are the host's picks of those rows.
    std::vector<float> rows;
    std::vector<int32_t> ids;
    gpu->verify_greedy(steps, std::vector<uint8_t>{1, 1}, rows, ids);
    REQUIRE(rows.size() == 7 * V);
    REQUIRE(ids.size() == 7);
    CHECK(ids == greedy_argmax_rows(rows, V));
    // Acceptance from the ids equals accept_drafts on the rows: drafts right up to each point.
    for (int lane = 0; lane < 2; ++lane) {
        const size_t first = lane ? 4 : 0, n = lane ? 3 : 4;
        const std::span<const int32_t> lane_ids = std::span(ids).subspan(first, n);
        for (size_t right = 0; right < n; ++right) {
            std::vector<int32_t> drafts;
            for (size_t j = 0; j + 1 < n; ++j) drafts.push_back(j < right ? lane_ids[j] : (lane_ids[j] + 1) % int32_t(V));
            std::vector<float> work(rows.begin() + long(first * V), rows.begin() + long((first + n) * V));
            const DraftAcceptance want = accept_drafts(work, V, drafts, {}, {});
            const DraftAcceptance got = accept_greedy_ids(lane_ids, drafts);
            INFO("lane " << lane << " right " << right);
            CHECK(got.accepted == right);
            CHECK(got.accepted == want.accepted);
            CHECK(got.next_token == want.next_token);
        }
    }
    // The same windows again, lane 1 alone asking for rows: the same ids, lane 1's rows only, bit
    // for bit; then keeping 2 of lane 0's window leaves its row 1 as the lane's logits.
    for (int lane = 0; lane < 2; ++lane) gpu->restore_lane(lane, start[size_t(lane)]);
    std::vector<float> rows1;
    std::vector<int32_t> ids1;
    gpu->verify_greedy(steps, std::vector<uint8_t>{0, 1}, rows1, ids1);
    CHECK(ids1 == ids);
    REQUIRE(rows1.size() == 3 * V);
    CHECK(std::equal(rows1.begin(), rows1.end(), rows.begin() + long(4 * V)));
    gpu->accept_verified(0, 2);
    gpu->accept_verified(1, 3);
    CHECK(gpu->lane_length(0) == 50 + 2);
    CHECK(gpu->last_logits(0) == std::vector<float>(rows.begin() + long(V), rows.begin() + long(2 * V)));
    CHECK(gpu->last_logits(1) == std::vector<float>(rows.end() - long(V), rows.end()));
    CHECK_THROWS_WITH(gpu->verify_greedy(steps, std::vector<uint8_t>{1}, rows1, ids1),
                      Catch::Contains("1 row flags for 2 steps"));
}
