// ninfer tests - the CPU backend's MTP head (draft_mtp) against the PyTorch reference of
// docs/MODEL.md §8 (tests/oracle/make_mtp_reference.py: the head in float64 from the fixtures'
// mtp.* tensors, fed by final-normed hidden states anchored to the transformers references). Per
// case: prefill the prompt (a prefix of the fixture's perplexity sequence, in two chunks); the
// prompt's last logits give the reference's NLL of the next token; draft K tokens after it. Every
// draft's logits reach cosine >= 0.9999 and max |d| <= 1e-3 x max |logit|, and the draft ids agree
// up to the first reference gap under 0.01. The references are committed (tests/fixtures/model/
// generality/{dense_vl,moe_fused}/mtp_ref.json); a missing one fails.
#include "tests/unit/model/oracle_support.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>

using namespace ninfer::core;
using namespace ninfer::test;

namespace {

const std::vector<std::string> kMtpFixtures = {"generality/dense_vl", "generality/moe_fused"};

double cosine(std::span<const float> a, std::span<const float> b) {
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        ab += double(a[i]) * b[i];
        aa += double(a[i]) * a[i];
        bb += double(b[i]) * b[i];
    }
    return ab / std::sqrt(aa * bb);
}

} // namespace

TEST_CASE("mtp_reference: draft logits match the PyTorch MTP reference", "[mtp_reference]") {
    for (const std::string& fixture : kMtpFixtures) {
        const std::string ref_path = kFixtureRoot + fixture + "/mtp_ref.json";
        INFO(ref_path << " (tests/oracle/README.md, MTP reference)");
        REQUIRE(std::filesystem::exists(ref_path));
        simdjson::dom::parser parser;
        simdjson::dom::element root = parser.load(ref_path);
        auto artifact = Artifact::open(convert_fixture(fixture, "bf16"));
        REQUIRE(artifact->has_component("mtp"));
        const ModelWeights weights = ModelWeights::from_artifact(*artifact);
        REQUIRE(weights.mtp);
        REQUIRE(int64_t(root["format"]) == 2);
        size_t n_cases = 0;
        for (simdjson::dom::element c : root["cases"].get_array()) {
            ++n_cases;
            const std::string prompt{std::string_view(c["prompt"])};
            const std::vector<int32_t> ids = int_list(c["ids"]), want_drafts = int_list(c["drafts"]);
            const int32_t next = int32_t(int64_t(c["next_token"]));
            const int k = int(int64_t(c["k"]));
            std::vector<double> gaps;
            for (simdjson::dom::element g : c["draft_gaps"].get_array())
                gaps.push_back(double(g));
            const double max_abs = double(c["max_abs_logit"]);
            const std::vector<float> want =
                read_f32(kFixtureRoot + fixture + "/" + std::string(std::string_view(c["logits_file"])));
            INFO(fixture << " prompt " << prompt << " K " << k);

            MemoryRequest req;
            req.max_context = 512;
            req.kv_dtype = KvDtype::F32;
            req.weight_bytes = weights.stored_bytes();
            req.available_bytes = 1ull << 34;
            req.mtp = true;
            req.max_draft_tokens = uint32_t(k);
            const MemoryPlan plan = MemoryPlan::make(weights.config, req);
            auto backend = make_cpu_backend(weights, plan);
            const size_t V = backend->vocab_size();
            REQUIRE(want.size() == size_t(k) * V);
            const std::span<const int32_t> p(ids);
            const size_t cut = ids.size() / 2;
            if (cut > 0)
                backend->prefill(0, p.first(cut), LogitsOut::None, nullptr);
            std::vector<float> last;
            backend->prefill(0, p.subspan(cut), LogitsOut::Last, &last);
            // The hidden states the head takes are the ones the reference was anchored with.
            const double max_last = std::max(*std::max_element(last.begin(), last.end()),
                                             -*std::min_element(last.begin(), last.end()));
            CHECK(std::fabs(log_sum_exp(last) - last[size_t(next)] - double(c["next_nll"])) <= 1e-3 * max_last);

            std::vector<std::vector<float>> logits;
            const auto drafts = backend->draft_mtp(std::vector<DraftRequest>{{0, next, k}}, &logits);
            REQUIRE(drafts[0].size() == size_t(k));
            REQUIRE(logits[0].size() == size_t(k) * V);
            for (int i = 0; i < k; ++i) {
                INFO("draft " << i << " reference gap " << gaps[size_t(i)]);
                const std::span<const float> got(logits[0].data() + size_t(i) * V, V),
                    ref(want.data() + size_t(i) * V, V);
                CHECK(cosine(got, ref) >= 0.9999);
                double diff = 0;
                for (size_t j = 0; j < V; ++j)
                    diff = std::max(diff, std::fabs(double(got[j]) - ref[j]));
                CHECK(diff <= 1e-3 * max_abs);
                CHECK(drafts[0][size_t(i)] == want_drafts[size_t(i)]);
                if (gaps[size_t(i)] < 0.01)
                    break; // a near tie: later drafts may follow another token
            }
        }
        CHECK(n_cases > 0);
    }
}
