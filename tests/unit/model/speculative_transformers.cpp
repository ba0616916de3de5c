// ninfer tests - speculative greedy decoding on the CPU backend still gives transformers' greedy
// tokens on the converted fixtures (issue 28, "How it is shown"): every prompt of every fixture,
// K = 3, with n-gram drafts (prompt lookup) and, where the checkpoint has a head, MTP drafts;
// identical up to and including the first reference step whose top-2 gap is under 0.01.
#include "core/engine/ngram_drafter.h"
#include "tests/unit/cpu/speculative_loop.h"
#include "tests/unit/model/oracle_support.h"

#include <catch2/catch.hpp>

using namespace ninfer::core;
using namespace ninfer::test;

namespace {

// Prompt lookup over the prompt and the tokens generated so far.
Drafter ngram_drafter(std::span<const int32_t> prompt) {
    auto d = std::make_shared<NgramDrafter>(NgramOptions{.min_ngram = 1, .max_ngram = 3});
    d->append(prompt);
    auto fed = std::make_shared<size_t>(0);
    return [d, fed](const std::vector<int32_t>& out, int k) {
        d->append(std::span(out).subspan(*fed));
        *fed = out.size();
        return d->draft(k);
    };
}

} // namespace

TEST_CASE("speculative_transformers: speculation keeps transformers' greedy tokens", "[speculative_transformers]") {
    const int k = 3;
    size_t checked = 0, mtp_rounds = 0, ngram_accepted = 0;
    for (const std::string& fixture : kFixtures) {
        auto artifact = Artifact::open(convert_fixture(fixture, "bf16"));
        const ModelWeights weights = ModelWeights::from_artifact(*artifact);
        MemoryRequest req;
        req.max_context = 512;
        req.kv_dtype = KvDtype::F32;
        req.weight_bytes = weights.stored_bytes();
        req.available_bytes = 1ull << 34;
        req.mtp = weights.mtp.has_value();
        req.max_draft_tokens = k;
        auto b = make_cpu_backend(weights, MemoryPlan::make(weights.config, req));
        const FixtureRefs refs = read_refs(fixture);
        for (const PromptRef& p : refs.prompts) {
            // Compare up to and including the first step with a reference gap under 0.01.
            size_t n = p.greedy.size();
            for (size_t i = 0; i < p.gaps.size(); ++i)
                if (p.gaps[i] < 0.01) {
                    n = i + 1;
                    break;
                }
            const std::vector<int32_t> want(p.greedy.begin(), p.greedy.begin() + long(n));
            INFO(fixture << " prompt " << p.name << " (" << n << " tokens)");
            RoundStats ngram;
            CHECK(speculative_greedy(*b, 0, p.ids, n, k, ngram_drafter(p.ids), ngram) == want);
            ngram_accepted += ngram.accepted;
            if (b->has_mtp()) {
                RoundStats mtp;
                CHECK(speculative_greedy(*b, 0, p.ids, n, k, mtp_drafter(*b, 0), mtp) == want);
                CHECK(mtp.drafted > 0);
                mtp_rounds += mtp.rounds;
            }
            ++checked;
        }
    }
    CHECK(checked == 24);
    CHECK(mtp_rounds > 0);     // two fixtures carry a head
    CHECK(ngram_accepted > 0); // some random continuations repeat the prompt
    WARN("speculative vs transformers: " << checked << " prompts, " << mtp_rounds << " MTP rounds, "
                                         << ngram_accepted << " n-gram drafts accepted");
}
