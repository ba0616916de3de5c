// ninfer tests - media digests in the sequence identity: prefix-cache keys and matches cover them,
// slot files carry them (the scheduler's lane reuse: tests/unit/vision/media_reuse.cpp).
#include "core/engine/prefix_cache.h"
#include "core/engine/slot_file.h"
#include "core/util/error.h"
#include "temp_dir.h"

#include <catch2/catch.hpp>

using namespace ninfer;
using namespace ninfer::core;

namespace {

std::vector<int32_t> tokens(size_t n, int32_t salt) {
    std::vector<int32_t> t;
    for (size_t i = 0; i < n; ++i) t.push_back(int32_t((i * 13 + size_t(salt)) % 900));
    return t;
}

MediaSpan span(uint32_t position, uint32_t n, uint8_t fill) {
    MediaSpan m;
    m.position = position, m.n_tokens = n;
    m.digest.fill(fill);
    return m;
}

SnapshotStoreOptions cache_options() {
    SnapshotStoreOptions o;
    o.host_budget_bytes = 1 << 20;
    o.lock_memory = false;
    return o;
}

} // namespace

TEST_CASE("prefix cache keys and matches cover the media digests", "[media_identity]") {
    PrefixCache cache(cache_options());
    LaneImage image;
    for (uint8_t& b : image.add_section(LaneSectionTag::Kv, 40 * 8)) b = 1;
    for (uint8_t& b : image.add_section(LaneSectionTag::Gdn, 64)) b = 2;
    image.tokens = tokens(40, 9);
    image.media = {span(3, 10, 0x11)};
    CHECK(prefix_key(image.tokens, image.media) != prefix_key(image.tokens));
    CHECK(prefix_key(image.tokens, {}) == prefix_key(image.tokens));
    REQUIRE(cache.insert(image, PrefixCache::Clock::now()));
    std::vector<int32_t> prompt = image.tokens;
    prompt.push_back(1);
    const std::vector<MediaSpan> same = {span(3, 10, 0x11)}, other = {span(3, 10, 0x12)}, moved = {span(4, 10, 0x11)};
    CHECK(cache.match(prompt, same, PrefixCache::Clock::now()) != nullptr);
    CHECK(cache.match(prompt, other, PrefixCache::Clock::now()) == nullptr);
    CHECK(cache.match(prompt, moved, PrefixCache::Clock::now()) == nullptr);
    CHECK(cache.match(prompt, PrefixCache::Clock::now()) == nullptr); // text with the same ids: other state
    std::vector<MediaSpan> plus_later = same;
    plus_later.push_back(span(40, 1, 0x77)); // starts after the checkpoint: not part of it
    CHECK(cache.match(prompt, plus_later, PrefixCache::Clock::now()) != nullptr);
}

TEST_CASE("slot files carry the media digests as their own required section", "[media_identity]") {
    ninfer::test::TempDir dir;
    SlotIdentity id;
    id.artifact_id = artifact_id_from_hex("00112233445566778899aabbccddeeff");
    id.model_id = "tiny-test";
    id.kv_bytes_per_token = 8;
    id.gdn_bytes = 64;
    id.max_context = 4096;
    LaneImage image;
    for (uint8_t& b : image.add_section(LaneSectionTag::Kv, 40 * 8)) b = 1;
    for (uint8_t& b : image.add_section(LaneSectionTag::Gdn, 64)) b = 2;
    image.tokens = tokens(40, 9);
    image.media = {span(3, 10, 0x11), span(20, 4, 0x22)};
    const std::string path = slot_file_path(dir.path, "m");
    slot_file_write(path, id, image, FileIoMode::Plain);
    const LaneImage back = slot_file_read(path, id, FileIoMode::Plain);
    CHECK(back == image);
    CHECK(media_digests_decode(media_digests_encode(image.media)) == image.media);
    CHECK_THROWS_WITH(media_digests_decode(std::vector<uint8_t>{2, 0, 0, 0, 1}), Catch::Contains("does not hold 2 items"));
    image.media.clear();
    slot_file_write(path, id, image, FileIoMode::Plain);
    CHECK(slot_file_read(path, id, FileIoMode::Plain).media.empty());
}
