// ninfer tests - seeded randomized fuzzing of the frame decoder and every payload decoder.
// Built with -DNINFER_SANITIZE=ON in CI's sanitizer stage, so an over-read is a failure, not luck.
#include "proto/frame.h"
#include "proto/messages.h"

#include <catch2/catch.hpp>

#include <random>

using namespace ninfer::proto;

namespace {
template <typename T> void try_decode(std::span<const uint8_t> b) { (void)decode_payload<T>(b); }

void decode_all(std::span<const uint8_t> b) {
    try_decode<StatusReply>(b);
    try_decode<MetricsReply>(b);
    try_decode<MetricsWatchRequest>(b);
    try_decode<SlotRequest>(b);
    try_decode<SlotReply>(b);
    try_decode<SlotListReply>(b);
    try_decode<CacheListReply>(b);
    try_decode<CacheEvictRequest>(b);
    try_decode<CountReply>(b);
    try_decode<ArtifactUpgradeRequest>(b);
    try_decode<ProgressReply>(b);
    try_decode<ArtifactUpgradeReply>(b);
    try_decode<LogLevelRequest>(b);
    try_decode<SettingsReply>(b);
    try_decode<ErrorReply>(b);
}
} // namespace

TEST_CASE("fuzz: random and mutated input never crashes the decoders", "[fuzz]") {
    std::mt19937_64 rng(20261129);
    StatusReply s;
    s.lanes = {{0, "idle", 1}, {1, "decode", 2}};
    std::vector<std::vector<uint8_t>> seeds = {
        encode_payload(s), encode_payload(SlotRequest{2, "name"}),
        encode_payload(CacheListReply{{{"k", 1, 2, "disk", 3, 4}}, 5, 6}),
        encode_payload(ProgressReply{1, 2, "m"}), encode_payload(SettingsReply{{{"port", "1", true, false}}}), encode_payload(ArtifactUpgradeReply{"/d", 1, "m", 2, 3, 4, 5, 6, 1})};
    size_t frames = 0;
    for (int iter = 0; iter < 200000; ++iter) {
        std::vector<uint8_t> b;
        if (iter % 2) {
            b = seeds[rng() % seeds.size()];
            int flips = 1 + int(rng() % 4);
            for (int i = 0; i < flips && !b.empty(); ++i)
                b[rng() % b.size()] = uint8_t(rng());
            if (rng() % 4 == 0)
                b.resize(rng() % (b.size() + 1));
        } else {
            b.resize(rng() % 64);
            for (auto& x : b)
                x = uint8_t(rng());
        }
        decode_all(b);
        // Frame decoder: a valid header with a random payload, or random bytes, in random splits.
        FrameHeader h;
        h.op = uint16_t(rng() % 20);
        std::vector<uint8_t> f = iter % 3 ? encode_frame(h, b) : b;
        if (iter % 5 == 0 && !f.empty())
            f[rng() % f.size()] ^= uint8_t(1u << (rng() % 8));
        FrameDecoder d;
        for (size_t off = 0; off < f.size();) {
            size_t n = 1 + rng() % 40;
            n = std::min(n, f.size() - off);
            d.feed({f.data() + off, n});
            off += n;
            while (auto fr = d.next()) {
                ++frames;
                decode_all(fr->payload);
            }
        }
    }
    CHECK(frames > 10000); // the valid frames did decode
}
