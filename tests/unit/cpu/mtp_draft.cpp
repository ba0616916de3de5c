// ninfer tests - the CPU MTP head (model.md §8) through draft_mtp: a hand-written evaluation of
// the head at position 0 (where attention reduces to V), and the bookkeeping of which hidden
// states the head has taken: chunked prefill, a decode, an accepted verify window and a batch of
// lanes all give the drafts a fresh lane gives. (The head against PyTorch: mtp_reference.cpp.)
#include "core/cpu/forward.h"
#include "core/cpu/lane_state.h"
#include "core/cpu/thread_pool.h"
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

std::vector<double> offset_norm(const std::vector<double>& x, const std::vector<float>& w, double eps) {
    double ms = 0;
    for (double v : x)
        ms += v * v;
    const double r = 1.0 / std::sqrt(ms / double(x.size()) + eps);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i)
        y[i] = x[i] * r * (1.0 + double(w[i]));
    return y;
}

std::vector<double> product(const Matrix& m, const std::vector<double>& x) {
    std::vector<float> rows(m.rows() * m.cols());
    m.decode(0, m.rows(), rows.data());
    std::vector<double> y(m.rows(), 0.0);
    for (size_t r = 0; r < m.rows(); ++r)
        for (size_t i = 0; i < m.cols(); ++i)
            y[r] += double(rows[r * m.cols() + i]) * x[i];
    return y;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

} // namespace

TEST_CASE("mtp_draft: the head at position 0 equals its formula", "[mtp_draft]") {
    const ModelConfig c = tiny_config(false);
    auto model = InMemoryModel::random(c, {.seed = 71, .with_mtp = true});
    const ModelWeights w = model->weights();
    REQUIRE(w.mtp);
    const MemoryPlan plan = tiny_speculative_plan(c, 1, 2, true);
    const int32_t x0 = 17, x1 = 101;
    // h_0: the main model's final-normed hidden state after the one-token prompt.
    ThreadPool pool(1);
    cpu::KvStore kv(c, plan);
    cpu::ModelRunner runner(w, plan, kv, pool);
    cpu::LaneState lane;
    lane.conv.assign(runner.conv_floats(), 0.0f);
    lane.recurrent.assign(runner.recurrent_floats(), 0.0f);
    kv.reserve(lane.pages, 1);
    const cpu::RowSegment seg{&lane, 0, 1, 0};
    runner.forward(std::span(&seg, 1), std::vector<int32_t>{x0});
    const size_t H = c.hidden_size;
    std::vector<double> h0(runner.hidden(0), runner.hidden(0) + H);

    // The formula: one key, so softmax = 1 and each query head's attention is its KV head's V.
    const MtpWeights& m = *w.mtp;
    const double eps = c.rms_norm_eps;
    std::vector<float> emb(H);
    w.token_embedding.decode(uint64_t(x1), 1, emb.data());
    std::vector<double> in = offset_norm(std::vector<double>(emb.begin(), emb.end()), m.embedding_norm, eps);
    const std::vector<double> hn = offset_norm(h0, m.hidden_norm, eps);
    in.insert(in.end(), hn.begin(), hn.end()); // embedding half first
    std::vector<double> u = product(m.input_projection, in);
    const LayerWeights& L = m.layer;
    const std::vector<double> a = offset_norm(u, L.input_norm, eps);
    const std::vector<double> v = product(L.attention.value, a), gate = product(L.attention.gate, a);
    const size_t hd = c.head_dim, group = c.num_attention_heads / c.num_key_value_heads;
    std::vector<double> attn(c.attn_q_dim());
    for (size_t h = 0; h < c.num_attention_heads; ++h)
        for (size_t d = 0; d < hd; ++d)
            attn[h * hd + d] = v[(h / group) * hd + d] * sigmoid(gate[h * hd + d]);
    const std::vector<double> o = product(L.attention.output, attn);
    for (size_t i = 0; i < H; ++i)
        u[i] += o[i];
    const std::vector<double> f = offset_norm(u, L.post_attention_norm, eps);
    const std::vector<double> g = product(L.mlp.gate, f), up = product(L.mlp.up, f);
    std::vector<double> act(g.size());
    for (size_t i = 0; i < g.size(); ++i)
        act[i] = g[i] * sigmoid(g[i]) * up[i];
    const std::vector<double> down = product(L.mlp.down, act);
    for (size_t i = 0; i < H; ++i)
        u[i] += down[i];
    const std::vector<double> want = product(w.output_head, offset_norm(u, m.final_norm, eps));

    auto b = make_cpu_backend(w, plan);
    b->prefill(0, std::vector<int32_t>{x0}, LogitsOut::None, nullptr);
    const Draft got = draft(*b, 0, x1, 1);
    REQUIRE(got.second.size() == want.size());
    CHECK(relative_error(got.second, std::vector<float>(want.begin(), want.end())) < 1e-5);
    CHECK(got.first[0] == int32_t(std::max_element(want.begin(), want.end()) - want.begin()));
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
