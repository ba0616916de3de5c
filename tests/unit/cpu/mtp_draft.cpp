// ninfer tests - the CPU MTP head (docs/MODEL.md §8) through draft_mtp: against the head written
// out in double over the whole prompt (mtp_formula.h), and the bookkeeping of which hidden states
// the head has taken: chunked prefill, a decode, an accepted verify window, lane images and a batch
// of lanes all give the drafts a fresh lane gives. (The head against PyTorch: mtp_reference.cpp.)
#include "tests/unit/cpu/lane_forward.h"
#include "tests/unit/cpu/mtp_formula.h"
#include "tests/unit/cpu/tiny_models.h"

#include <catch2/catch.hpp>

using namespace ninfer::core;
using namespace ninfer::test;

namespace {

using Draft = std::pair<std::vector<int32_t>, std::vector<float>>; // ids, logits rows

Draft draft(Backend& b, int lane, int32_t next, int k) {
    std::vector<std::vector<float>> logits;
    auto ids = b.draft_mtp(std::vector<DraftRequest>{{lane, next, k}}, &logits);
    return {ids[0], logits[0]};
}

void check_same(const Draft& a, const Draft& b) {
    CHECK(a.first == b.first);
    REQUIRE(a.second.size() == b.second.size());
    CHECK(relative_error(a.second, b.second) < 1e-5);
}

} // namespace

TEST_CASE("mtp_draft: drafts equal the head's formula over the whole prompt", "[mtp_draft]") {
    for (bool moe : {false, true}) {
        INFO("moe " << moe);
        const ModelConfig c = tiny_config(moe);
        auto model = InMemoryModel::random(c, {.seed = 71, .with_mtp = true});
        const ModelWeights w = model->weights();
        REQUIRE(w.mtp);
        const MemoryPlan plan = tiny_speculative_plan(c, 1, 3, true);
        const auto prompt = random_tokens(6, c.vocab_size, 17);
        const int32_t next = 101;
        // h_t: the main model's final-normed hidden states over the prompt.
        const std::vector<float> rows = final_hidden_rows(w, plan, prompt);
        std::vector<Vec> hidden;
        for (size_t t = 0; t < prompt.size(); ++t)
            hidden.emplace_back(rows.begin() + long(t * c.hidden_size), rows.begin() + long((t + 1) * c.hidden_size));
        const std::vector<Vec> want = MtpFormula(w).draft(hidden, prompt, next, 3);

        auto b = make_cpu_backend(w, plan);
        b->prefill(0, std::span(prompt).first(4), LogitsOut::None, nullptr); // two chunks
        b->prefill(0, std::span(prompt).subspan(4), LogitsOut::None, nullptr);
        const Draft got = draft(*b, 0, next, 3);
        REQUIRE(got.second.size() == 3 * size_t(c.vocab_size));
        for (size_t i = 0; i < 3; ++i) {
            INFO("draft " << i);
            const std::vector<float> row(got.second.begin() + long(i * c.vocab_size),
                                         got.second.begin() + long((i + 1) * c.vocab_size));
            CHECK(relative_error(row, std::vector<float>(want[i].begin(), want[i].end())) < 1e-5);
            CHECK(got.first[i] == int32_t(std::max_element(want[i].begin(), want[i].end()) - want[i].begin()));
        }
    }
}

TEST_CASE("mtp_draft: every way of reaching a sequence drafts alike", "[mtp_draft]") {
    for (bool moe : {false, true}) {
        INFO("moe " << moe);
        const ModelConfig c = tiny_config(moe);
        auto model = InMemoryModel::random(c, {.seed = 72, .with_mtp = true});
        const ModelWeights w = model->weights();
        auto b = make_cpu_backend(w, tiny_speculative_plan(c, 4, 4, true, KvDtype::F32, 512));
        const auto prompt = random_tokens(150, c.vocab_size, 7);
        const int32_t x = 11, y = 12;
        b->prefill(0, prompt, LogitsOut::None, nullptr);
        const Draft whole = draft(*b, 0, x, 4);
        CHECK(whole.first.size() == 4);
        CHECK(whole.second.size() == 4 * size_t(c.vocab_size));
        // Drafting changes nothing visible and can be repeated.
        CHECK(b->lane_length(0) == prompt.size());
        check_same(draft(*b, 0, x, 4), whole);

        // Chunked prefill (pending hidden rows carried across chunks).
        const std::span<const int32_t> p(prompt);
        b->prefill(1, p.first(50), LogitsOut::None, nullptr);
        b->prefill(1, p.subspan(50, 63), LogitsOut::None, nullptr);
        b->prefill(1, p.subspan(113), LogitsOut::None, nullptr);
        check_same(draft(*b, 1, x, 4), whole);

        // A lane that decoded x drafts after x as one prefilled with it.
        std::vector<int32_t> px = prompt;
        px.push_back(x);
        b->reset_lane(2);
        b->prefill(2, px, LogitsOut::None, nullptr);
        const Draft after_x = draft(*b, 2, y, 3);
        DecodeStep step;
        step.lane = 1;
        step.token = x;
        b->decode(std::span(&step, 1));
        check_same(draft(*b, 1, y, 3), after_x);

        // An accepted verify window: keep x and two drafts, then draft after the bonus token.
        b->reset_lane(3);
        b->prefill(3, prompt, LogitsOut::None, nullptr);
        std::vector<int32_t> window{x};
        window.insert(window.end(), whole.first.begin(), whole.first.end());
        std::vector<float> rows;
        b->verify(std::vector<VerifyStep>{{3, window}}, rows);
        b->accept_verified(3, 3);
        std::vector<int32_t> kept = prompt;
        kept.insert(kept.end(), window.begin(), window.begin() + 3);
        b->reset_lane(2);
        b->prefill(2, kept, LogitsOut::None, nullptr);
        check_same(draft(*b, 3, y, 2), draft(*b, 2, y, 2));

        // One batch of lanes at different lengths equals each drafted alone.
        const std::vector<DraftRequest> batch{{2, y, 2}, {0, x, 4}, {3, y, 1}};
        std::vector<std::vector<float>> logits;
        const auto ids = b->draft_mtp(batch, &logits);
        for (size_t i = 0; i < batch.size(); ++i) {
            INFO("batch request " << i);
            check_same({ids[i], logits[i]}, draft(*b, batch[i].lane, batch[i].next_token, batch[i].k));
        }
    }
}

TEST_CASE("mtp_draft: lane images carry the head's state; limits", "[mtp_draft]") {
    const ModelConfig c = tiny_config(false);
    auto model = InMemoryModel::random(c, {.seed = 73, .with_mtp = true});
    const ModelWeights w = model->weights();
    auto b = make_cpu_backend(w, tiny_speculative_plan(c, 2, 3, true, KvDtype::F32, 64));
    const auto prompt = random_tokens(20, c.vocab_size, 8);
    b->prefill(0, prompt, LogitsOut::None, nullptr);
    // Occupy lane 1 first so the restored lane gets other pages (stale MTP rows in them).
    b->prefill(1, random_tokens(30, c.vocab_size, 9), LogitsOut::None, nullptr);
    LaneImage image = b->save_lane(0);
    const LaneSection* section = image.find(LaneSectionTag::MtpKv);
    REQUIRE(section);
    CHECK_FALSE(section->required);
    b->restore_lane(1, image);
    check_same(draft(*b, 1, 5, 3), draft(*b, 0, 5, 3));

    // Without the section the head has no hidden state for the lane until its next decode.
    image.sections.erase(std::find_if(image.sections.begin(), image.sections.end(),
                                      [](const LaneSection& x) { return x.tag == LaneSectionTag::MtpKv; }));
    b->restore_lane(1, image);
    CHECK(draft(*b, 1, 5, 3).first.empty());
    DecodeStep step;
    step.lane = 1;
    step.token = 5;
    b->decode(std::span(&step, 1));
    CHECK(draft(*b, 1, 6, 3).first.size() == 3);
    // A section that does not fit the image is refused.
    LaneImage bad = b->save_lane(0);
    std::span<uint8_t> header = bad.section(LaneSectionTag::MtpKv);
    header[4] += 1; // one more pending row than the image's tokens leave
    CHECK_THROWS_WITH(b->restore_lane(1, bad), Catch::Contains("MTP section"));

    CHECK_THROWS_WITH(draft(*b, 0, 5, 4), Catch::Contains("plan allows 1..3"));
    CHECK_THROWS_WITH(draft(*b, 0, int32_t(c.vocab_size), 1), Catch::Contains("outside the vocabulary"));
    CHECK_THROWS_WITH(b->draft_mtp(std::vector<DraftRequest>{{0, 1, 1}, {0, 1, 1}}, nullptr),
                      Catch::Contains("appears twice"));
    // Near max-context (64) only the drafts whose verify still fits come back.
    b->reset_lane(0);
    b->prefill(0, random_tokens(61, c.vocab_size, 9), LogitsOut::None, nullptr);
    CHECK(draft(*b, 0, 5, 3).first.size() == 2);
    b->prefill(0, std::vector<int32_t>{1, 2}, LogitsOut::None, nullptr);
    CHECK(draft(*b, 0, 5, 3).first.empty());

    // A plan that counts the MTP layer needs weights with the head.
    auto text_only = InMemoryModel::random(c, {.seed = 73});
    const ModelWeights tw = text_only->weights();
    CHECK_THROWS_WITH(make_cpu_backend(tw, tiny_speculative_plan(c, 1, 2, true)),
                      Catch::Contains("no MTP head"));
}
