// ninfer tests - control frames: encode/decode, any byte split, and every refusal.
#include "proto/frame.h"
#include "proto/wire.h"

#include <catch2/catch.hpp>

#include <cstring>

using namespace ninfer::proto;

static std::vector<uint8_t> frame_bytes(uint16_t op, std::vector<uint8_t> payload, uint64_t id = 7) {
    FrameHeader h;
    h.op = op;
    h.request_id = id;
    return encode_frame(h, payload);
}

TEST_CASE("frame: header layout is 32 little-endian bytes", "[frame]") {
    std::vector<uint8_t> b = frame_bytes(uint16_t(Op::SlotSave), {1, 2, 3}, 0x0102030405060708ull);
    REQUIRE(b.size() == kHeaderBytes + 3);
    CHECK(std::vector<uint8_t>(b.begin(), b.begin() + 4) == std::vector<uint8_t>{'N', 'I', 'C', 'P'});
    CHECK(b[4] == 1); // version
    CHECK(b[6] == 5); // op
    CHECK(b[16] == 0x08);
    CHECK(b[24] == 3); // payload length
}

TEST_CASE("frame: frames survive any split of the byte stream", "[frame]") {
    std::vector<uint8_t> stream;
    for (int i = 0; i < 5; ++i) {
        std::vector<uint8_t> f = frame_bytes(uint16_t(Op::Status), std::vector<uint8_t>(size_t(i * 10), uint8_t(i)), uint64_t(i));
        stream.insert(stream.end(), f.begin(), f.end());
    }
    for (size_t chunk : {size_t(1), size_t(3), size_t(31), size_t(32), size_t(33), size_t(1000)}) {
        FrameDecoder d;
        std::vector<Frame> got;
        for (size_t off = 0; off < stream.size(); off += chunk) {
            d.feed({stream.data() + off, std::min(chunk, stream.size() - off)});
            while (auto f = d.next())
                got.push_back(std::move(*f));
        }
        REQUIRE(got.size() == 5);
        for (int i = 0; i < 5; ++i) {
            CHECK(got[size_t(i)].header.request_id == uint64_t(i));
            CHECK(got[size_t(i)].payload.size() == size_t(i * 10));
        }
        CHECK_FALSE(d.has_error());
    }
}

TEST_CASE("frame: refusals are clear and final", "[frame]") {
    using Catch::Matchers::Contains;
    auto decode_error = [](std::vector<uint8_t> b) {
        FrameDecoder d;
        d.feed(b);
        CHECK_FALSE(d.next().has_value());
        return d.error();
    };
    std::vector<uint8_t> good = frame_bytes(1, {});
    auto bad = good;
    bad[0] = 'X';
    CHECK_THAT(decode_error(bad), Contains("bad magic"));
    bad = good;
    bad[4] = 9;
    CHECK_THAT(decode_error(bad), Contains("protocol version 9 not supported"));
    bad = good;
    bad[10] = 1;
    CHECK_THAT(decode_error(bad), Contains("reserved"));
    bad = good;
    bad[28] = 1;
    CHECK_THAT(decode_error(bad), Contains("reserved"));
    bad = good;
    bad[8] = 0x80;
    CHECK_THAT(decode_error(bad), Contains("unknown frame flags"));
    bad = good;
    uint32_t huge = kMaxPayloadBytes + 1;
    std::memcpy(bad.data() + 24, &huge, 4);
    CHECK_THAT(decode_error(bad), Contains("exceeds"));
}

TEST_CASE("frame: unknown ops decode (the server answers them), names are stable", "[frame]") {
    FrameDecoder d;
    d.feed(frame_bytes(999, {}));
    auto f = d.next();
    REQUIRE(f);
    CHECK(f->header.op == 999);
    CHECK(op_name(999) == "unknown");
    CHECK(op_name(uint16_t(Op::SlotRestore)) == "slot-restore");
    CHECK(op_name(15) == "settings"); // numbers are append-only: 15 is settings forever
    CHECK_FALSE(op_is_admin(Op::Settings));
    CHECK(op_is_admin(Op::SlotErase));
    CHECK_FALSE(op_is_admin(Op::Status));
    CHECK(op_is_admin(Op(999)));
}
