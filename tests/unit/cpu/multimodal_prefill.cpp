// ninfer tests - the CPU backend's multimodal prefill (backend.h prefill_with): embedding rows at the
// placeholders, M-RoPE positions (tables checked against docs/MODEL.md §5's rule in float64), the text
// position after a multimodal span across decode, chunks and lane images.
#include "core/backend/mrope.h"
#include "core/cpu/ops.h"
#include "core/engine/slot_file.h"
#include "tests/unit/cpu/tiny_models.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <unistd.h>

using namespace ninfer::core;
using namespace ninfer::test;

namespace {

struct Rig {
    ModelConfig c = tiny_config(false);
    std::unique_ptr<InMemoryModel> model = InMemoryModel::random(c, {.seed = 41});
    ModelWeights w = model->weights();
    MemoryPlan plan = tiny_plan(c, 4, KvDtype::F32);
    std::unique_ptr<Backend> backend = make_cpu_backend(w, plan);
};

std::vector<float> embedding_of(const ModelWeights& w, int32_t token) {
    std::vector<float> row(w.config.hidden_size);
    w.token_embedding.decode(uint64_t(token), 1, row.data());
    return row;
}

// A prompt "text, <image: a 4x6-patch grid = 6 tokens>, text" with its M-RoPE layout.
struct ImagePrompt {
    std::vector<int32_t> tokens;
    MropeLayout layout;
    std::vector<int32_t> rows;   // embedding row per token
    std::vector<float> embeddings;
};

ImagePrompt image_prompt(const Rig& r, int32_t pad) {
    ImagePrompt p;
    p.tokens = random_tokens(5, r.c.vocab_size, 3);
    for (int i = 0; i < 6; ++i)
        p.tokens.push_back(pad);
    for (int32_t t : random_tokens(4, r.c.vocab_size, 4))
        p.tokens.push_back(t == pad ? t + 1 : t);
    const MediaGrid grid{false, 1, 4, 6};
    p.layout = mrope_positions(p.tokens, pad, -1, std::span(&grid, 1), 2);
    std::mt19937_64 rng(9);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (size_t i = 0; i < p.tokens.size(); ++i)
        p.rows.push_back(p.tokens[i] == pad ? int32_t(p.embeddings.size() / r.c.hidden_size) : -1);
    p.embeddings.resize(6 * size_t(r.c.hidden_size));
    for (float& x : p.embeddings)
        x = normal(rng);
    return p;
}

PrefillInputs inputs_of(const ImagePrompt& p, size_t begin, size_t end) {
    return {std::span(p.layout.positions).subspan(begin, end - begin), std::span(p.rows).subspan(begin, end - begin),
            p.embeddings};
}

} // namespace

TEST_CASE("multimodal_prefill: text positions and no rows equal plain prefill; rows replace embeddings", "[multimodal_prefill]") {
    Rig r;
    const auto tokens = random_tokens(40, r.c.vocab_size, 1);
    std::vector<float> plain, with;
    r.backend->prefill(0, tokens, LogitsOut::All, &plain);
    std::vector<MropePosition> pos;
    for (uint32_t i = 0; i < tokens.size(); ++i)
        pos.push_back(MropePosition::text(i));
    const std::vector<int32_t> none(tokens.size(), -1);
    r.backend->prefill_with(1, tokens, {pos, none, {}}, LogitsOut::All, &with);
    CHECK(with == plain);

    // Rows holding token 17's embedding at three places equal a prompt with 17 there.
    std::vector<int32_t> replaced = tokens, rows(tokens.size(), -1);
    const std::vector<float> e17 = embedding_of(r.w, 17);
    std::vector<float> emb = e17;
    emb.insert(emb.end(), e17.begin(), e17.end());
    for (size_t i : {3, 20, 39}) {
        replaced[i] = 17;
        rows[i] = i == 39 ? 1 : 0;
    }
    std::vector<float> want, got;
    r.backend->prefill(2, replaced, LogitsOut::All, &want);
    r.backend->prefill_with(3, tokens, {pos, rows, emb}, LogitsOut::All, &got);
    CHECK(got == want);
    CHECK_THROWS_WITH(r.backend->prefill_with(0, tokens, {pos, std::vector<int32_t>(tokens.size(), 2), emb},
                                              LogitsOut::None, nullptr),
                      Catch::Contains("embedding row 2 past the 2 rows given"));
    CHECK_THROWS_WITH(r.backend->prefill_with(0, tokens, {std::span(pos).first(3), rows, emb}, LogitsOut::None, nullptr),
                      Catch::Contains("with 3 positions"));
}

TEST_CASE("multimodal_prefill: M-RoPE tables follow mrope_section, interleaved", "[multimodal_prefill]") {
    const uint32_t rot = 64; // 32 pairs: docs/MODEL.md §5, sections [11, 11, 10]
    const std::vector<uint32_t> sections = {11, 11, 10};
    const MropePosition p{5, 70, 900};
    std::vector<float> cs(rot / 2), sn(rot / 2);
    cpu::mrope_tables(p, rot, 1e7, sections, true, cs.data(), sn.data());
    for (uint32_t j = 0; j < rot / 2; ++j) {
        const uint32_t axis = (j % 3 == 1 && j < 33) ? p.h : (j % 3 == 2 && j < 30) ? p.w : p.t;
        const double angle = double(axis) * std::pow(1e7, -2.0 * j / double(rot));
        INFO("pair " << j);
        CHECK(cs[j] == Approx(std::cos(angle)).margin(2e-4)); // f32 angles of up to ~900 rad
        CHECK(sn[j] == Approx(std::sin(angle)).margin(2e-4));
    }
    // Equal positions are exactly the 1-D tables.
    std::vector<float> c1(rot / 2), s1(rot / 2);
    cpu::mrope_tables(MropePosition::text(123), rot, 1e7, sections, true, cs.data(), sn.data());
    cpu::rope_tables(123, rot, 1e7, c1.data(), s1.data());
    CHECK(cs == c1);
    CHECK(sn == s1);
}

TEST_CASE("multimodal_prefill: text after an image continues at its largest position + 1", "[multimodal_prefill]") {
    Rig r;
    const int32_t pad = 200;
    const ImagePrompt p = image_prompt(r, pad);
    REQUIRE(p.layout.next == 5 + 3 + 4); // 5 text, the image takes max(2, 3) = 3, 4 text
    const size_t n = p.tokens.size();

    // Lane 0: the prompt, then one decode step at position next.
    r.backend->prefill_with(0, p.tokens, inputs_of(p, 0, n), LogitsOut::Last, nullptr);
    DecodeStep step;
    step.lane = 0;
    step.token = 33;
    r.backend->decode(std::span(&step, 1));
    const std::vector<float> decoded = r.backend->last_logits(0);

    // Lane 1: the prompt and the token in one prefill, the token at text position next.
    ImagePrompt q = p;
    q.tokens.push_back(33);
    q.rows.push_back(-1);
    q.layout.positions.push_back(MropePosition::text(p.layout.next));
    std::vector<float> whole;
    r.backend->prefill_with(1, q.tokens, inputs_of(q, 0, n + 1), LogitsOut::Last, &whole);
    CHECK(relative_error(decoded, whole) < 1e-4);

    // The same chunked in three pieces, one boundary inside the image.
    r.backend->prefill_with(2, std::span(q.tokens).first(7), inputs_of(q, 0, 7), LogitsOut::None, nullptr);
    r.backend->prefill_with(2, std::span(q.tokens).subspan(7, 5), inputs_of(q, 7, 12), LogitsOut::None, nullptr);
    std::vector<float> chunked;
    r.backend->prefill_with(2, std::span(q.tokens).subspan(12), inputs_of(q, 12, n + 1), LogitsOut::Last, &chunked);
    CHECK(relative_error(chunked, whole) < 1e-5);

    // Text positions instead (ignoring the image's compression) give another answer.
    ImagePrompt flat = q;
    for (uint32_t i = 0; i < flat.layout.positions.size(); ++i)
        flat.layout.positions[i] = MropePosition::text(i);
    std::vector<float> wrong;
    r.backend->prefill_with(3, flat.tokens, inputs_of(flat, 0, n + 1), LogitsOut::Last, &wrong);
    CHECK(relative_error(wrong, whole) > 1e-3);
}

TEST_CASE("multimodal_prefill: lane images keep the next text position", "[multimodal_prefill]") {
    Rig r;
    const ImagePrompt p = image_prompt(r, 200);
    r.backend->prefill_with(0, p.tokens, inputs_of(p, 0, p.tokens.size()), LogitsOut::Last, nullptr);
    const LaneImage image = r.backend->save_lane(0);
    const std::span<const uint8_t> rope = image.section(LaneSectionTag::RopePosition);
    REQUIRE(rope.size() == 4);
    uint32_t next = 0;
    std::memcpy(&next, rope.data(), 4);
    CHECK(next == p.layout.next);
    CHECK_THROWS_WITH(lane_image_check(image, r.plan), Catch::Contains("rope_position section this backend cannot"));

    // Through a slot file too (the section is readable there and kept byte for byte).
    SlotIdentity id;
    id.model_id = "multimodal-test";
    id.kv_dtype = r.plan.kv_dtype;
    id.kv_bytes_per_token = r.plan.kv_bytes_per_token;
    id.gdn_bytes = r.plan.lane_image_gdn_bytes();
    id.max_context = r.plan.max_context;
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("ninfer_multimodal_" + std::to_string(getpid()) + ".nslot")).string();
    slot_file_write(path, id, image, FileIoMode::Plain);
    const LaneImage back = slot_file_read(path, id, FileIoMode::Plain);
    std::filesystem::remove(path);
    CHECK(back == image);
    r.backend->restore_lane(2, back);
    for (int lane : {0, 2}) {
        DecodeStep step;
        step.lane = lane;
        step.token = 12;
        r.backend->decode(std::span(&step, 1));
    }
    CHECK(r.backend->last_logits(0) == r.backend->last_logits(2));

    // A text lane writes no such section, and reset forgets the offset.
    r.backend->reset_lane(0);
    r.backend->prefill(0, random_tokens(9, r.c.vocab_size, 8), LogitsOut::Last, nullptr);
    CHECK_FALSE(r.backend->save_lane(0).find(LaneSectionTag::RopePosition));
}

TEST_CASE("multimodal_prefill: the MTP head takes the tower rows and M-RoPE positions", "[multimodal_prefill]") {
    const ModelConfig c = tiny_config(false);
    auto model = InMemoryModel::random(c, {.seed = 43, .with_mtp = true});
    const ModelWeights w = model->weights();
    const MemoryPlan plan = tiny_speculative_plan(c, 4, 3, true);
    auto backend = make_cpu_backend(w, plan);
    const DraftRequest base{0, 3, 3};

    // Rows holding token 17's embedding at 5 and 17 equal a prompt with 17 there, for the head too
    // (it reads x_{t+1} at t = 4 and 16), in two chunks split right before the second row.
    const auto tokens = random_tokens(30, c.vocab_size, 2);
    std::vector<int32_t> replaced = tokens, rows(tokens.size(), -1);
    std::vector<MropePosition> text;
    for (uint32_t i = 0; i < tokens.size(); ++i)
        text.push_back(MropePosition::text(i));
    const std::vector<float> emb = embedding_of(w, 17);
    for (size_t i : {5, 17}) {
        replaced[i] = 17;
        rows[i] = 0;
    }
    for (auto [begin, end] : {std::pair<size_t, size_t>{0, 17}, {17, 30}}) {
        backend->prefill(0, std::span(replaced).subspan(begin, end - begin), LogitsOut::Last, nullptr);
        backend->prefill_with(1, std::span(tokens).subspan(begin, end - begin),
                              {std::span(text).subspan(begin, end - begin), std::span(rows).subspan(begin, end - begin), emb},
                              LogitsOut::Last, nullptr);
    }
    std::vector<std::vector<float>> want, got;
    DraftRequest r0 = base, r1 = base;
    r1.lane = 1;
    const auto d0 = backend->draft_mtp(std::span(&r0, 1), &want);
    const auto d1 = backend->draft_mtp(std::span(&r1, 1), &got);
    CHECK(d1 == d0);
    CHECK(got == want);

    // An image's M-RoPE positions: one prefill and two chunks split inside the image (the head's
    // pending row keeps its position across the chunks) draft the same.
    Rig r;
    const ImagePrompt p = image_prompt(r, 200);
    ImagePrompt q = p; // the same prompt on this MTP model's vocabulary
    backend->prefill_with(2, q.tokens, inputs_of(q, 0, q.tokens.size()), LogitsOut::Last, nullptr);
    backend->prefill_with(3, std::span(q.tokens).first(8), inputs_of(q, 0, 8), LogitsOut::None, nullptr);
    backend->prefill_with(3, std::span(q.tokens).subspan(8), inputs_of(q, 8, q.tokens.size()), LogitsOut::Last, nullptr);
    DraftRequest r2 = base, r3 = base;
    r2.lane = 2;
    r3.lane = 3;
    std::vector<std::vector<float>> whole, chunked;
    CHECK(backend->draft_mtp(std::span(&r2, 1), &whole) == backend->draft_mtp(std::span(&r3, 1), &chunked));
    REQUIRE(whole.size() == 1);
    CHECK(relative_error(chunked[0], whole[0]) < 1e-5);
}
