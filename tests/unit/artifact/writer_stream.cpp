// ninfer tests - artifact writer streaming API: tensors written in pieces, in any order, give the
// same file as add_tensor; gaps, overlaps, out-of-range writes and unclosed streams are refused.
#include "core/artifact/artifact.h"
#include "core/artifact/writer.h"
#include "core/formats/codec.h"
#include "core/formats/format.h"
#include "core/util/error.h"
#include "tests/unit/artifact/artifact_test_util.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>

using namespace ninfer;
using namespace ninfer::core;
using Catch::Matchers::Contains;
using ninfer::test::ScratchDir;

namespace {

struct Piece {
    uint64_t offset, size;
};

std::vector<float> values_for(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v)
        x = d(rng);
    return v;
}

// Random cut points over [0, bytes), shuffled.
std::vector<Piece> shuffled_pieces(uint64_t bytes, std::mt19937& rng) {
    std::vector<uint64_t> cuts = {0, bytes};
    for (int i = 0; i < 12; ++i)
        cuts.push_back(rng() % bytes);
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    std::vector<Piece> pieces;
    for (size_t i = 0; i + 1 < cuts.size(); ++i)
        pieces.push_back({cuts[i], cuts[i + 1] - cuts[i]});
    std::shuffle(pieces.begin(), pieces.end(), rng);
    return pieces;
}

void finish_minimal(ArtifactWriter& w) {
    w.add_resource("resource/text/tokenizer.json", test::as_bytes("{}"));
    w.add_component("text", R"({"hidden_size":2})", {}, {{"tokenizer.json", "resource/text/tokenizer.json"}});
    w.set_metadata_json(R"({"name":"stream"})");
    w.finish();
}

} // namespace

TEST_CASE("writer_stream: pieces in any order give the same file as add_tensor", "[writer_stream]") {
    ScratchDir dir;
    const TensorFormat formats[] = {TensorFormat::Bf16, TensorFormat::Q4G64Fp16, TensorFormat::Q6G64Fp16,
                                    TensorFormat::Fp8E4m3fnRowBf16, TensorFormat::Nvfp4};
    std::vector<std::vector<uint64_t>> shapes = {{7, 9}, {5, 300}, {4, 130}, {6, 33}, {128, 64}};
    std::vector<std::vector<uint8_t>> encoded;
    for (size_t i = 0; i < std::size(formats); ++i)
        encoded.push_back(encode(formats[i], shapes[i], values_for(shapes[i][0] * shapes[i][1], uint32_t(i))));
    {
        ArtifactWriter w(dir.file("whole.ninfer"), {});
        for (size_t i = 0; i < std::size(formats); ++i)
            w.bind("p" + std::to_string(i), w.add_tensor("t" + std::to_string(i), formats[i], shapes[i], encoded[i]));
        finish_minimal(w);
    }
    {
        std::mt19937 rng(5);
        ArtifactWriter w(dir.file("streamed.ninfer"), {});
        // Two streams open at once, their pieces interleaved.
        std::vector<ArtifactWriter::TensorStream> streams;
        for (size_t i = 0; i < std::size(formats); ++i)
            streams.push_back(w.begin_tensor("t" + std::to_string(i), formats[i], shapes[i]));
        for (size_t i = 0; i < std::size(formats); ++i)
            for (const Piece& p : shuffled_pieces(encoded[i].size(), rng))
                w.write(streams[i], p.offset, std::span(encoded[i]).subspan(p.offset, p.size));
        for (size_t i = 0; i < std::size(formats); ++i)
            w.bind("p" + std::to_string(i), w.end_tensor(streams[i]));
        finish_minimal(w);
    }
    // Identical files but for the random set id in header bytes [16, 32).
    std::vector<uint8_t> whole = test::read_bytes(dir.file("whole.ninfer"));
    std::vector<uint8_t> streamed = test::read_bytes(dir.file("streamed.ninfer"));
    REQUIRE(whole.size() == streamed.size());
    std::fill(whole.begin() + 16, whole.begin() + 32, 0);
    std::fill(streamed.begin() + 16, streamed.begin() + 32, 0);
    CHECK(whole == streamed);
    auto a = Artifact::open(dir.file("streamed.ninfer"));
    REQUIRE(a->tensors().size() == std::size(formats));
    for (size_t i = 0; i < std::size(formats); ++i)
        CHECK(std::equal(a->tensors()[i].data, a->tensors()[i].data + a->tensors()[i].bytes, encoded[i].begin()));
}

TEST_CASE("writer_stream: every byte exactly once", "[writer_stream]") {
    ScratchDir dir;
    const std::vector<uint64_t> shape = {4, 8}; // bf16: 64 bytes
    const std::vector<uint8_t> bytes(64, 0x3f);
    const std::span<const uint8_t> all(bytes);

    SECTION("a gap is reported at end_tensor with its first byte") {
        ArtifactWriter w(dir.file("a.ninfer"), {});
        auto s = w.begin_tensor("t", TensorFormat::Bf16, shape);
        w.write(s, 0, all.first(16));
        w.write(s, 40, all.subspan(40));
        CHECK_THROWS_WITH(w.end_tensor(s), Contains("tensor t: byte 16 of 64 was never written"));
    }
    SECTION("nothing written") {
        ArtifactWriter w(dir.file("a.ninfer"), {});
        auto s = w.begin_tensor("t", TensorFormat::Bf16, shape);
        w.write(s, 8, all.subspan(8));
        CHECK_THROWS_WITH(w.end_tensor(s), Contains("byte 0 of 64 was never written"));
    }
    SECTION("an overlap is refused when written") {
        ArtifactWriter w(dir.file("a.ninfer"), {});
        auto s = w.begin_tensor("t", TensorFormat::Bf16, shape);
        w.write(s, 10, all.subspan(10, 10));
        w.write(s, 30, all.subspan(30, 10));
        CHECK_THROWS_WITH(w.write(s, 15, all.subspan(15, 2)), Contains("bytes [15,17) written twice"));
        CHECK_THROWS_WITH(w.write(s, 0, all.first(11)), Contains("bytes [10,11) written twice"));
        CHECK_THROWS_WITH(w.write(s, 19, all.subspan(19, 20)), Contains("written twice"));
        w.write(s, 20, all.subspan(20, 10)); // exactly fills the hole between the two
        w.write(s, 0, all.first(10));
        w.write(s, 40, all.subspan(40));
        CHECK(w.end_tensor(s) == "t");
    }
    SECTION("a write past the object's end is refused") {
        ArtifactWriter w(dir.file("a.ninfer"), {});
        auto s = w.begin_tensor("t", TensorFormat::Bf16, shape);
        CHECK_THROWS_WITH(w.write(s, 60, all.first(8)), Contains("write [60,68) exceeds its 64 bytes"));
    }
    SECTION("a closed stream takes no more writes; finish refuses an open one") {
        ArtifactWriter w(dir.file("a.ninfer"), {});
        auto s = w.begin_tensor("t", TensorFormat::Bf16, shape);
        w.write(s, 0, all);
        w.bind("p", w.end_tensor(s));
        CHECK_THROWS_WITH(w.write(s, 0, all.first(2)), Contains("not open"));
        CHECK_THROWS_WITH(w.end_tensor(s), Contains("not open"));
        auto open = w.begin_tensor("u", TensorFormat::Bf16, shape);
        w.write(open, 0, all);
        CHECK_THROWS_WITH(finish_minimal(w), Contains("tensor u is still open"));
        CHECK(!std::filesystem::exists(dir.file("a.ninfer"))); // nothing published
    }
}

TEST_CASE("writer_stream: a header reserve keeps the payload in place and the bytes readable", "[writer_stream]") {
    ScratchDir dir;
    const std::vector<uint64_t> shape = {256, 128};
    const std::vector<uint8_t> enc = encode(TensorFormat::Q4G64Fp16, shape, values_for(256 * 128, 7));
    auto write = [&](const std::string& name, ArtifactWriterOptions opt) {
        ArtifactWriter w(dir.file(name), opt);
        const ArtifactWriter::TensorStream s = w.begin_tensor("weight/0", TensorFormat::Q4G64Fp16, shape);
        w.write(s, 100, std::span<const uint8_t>(enc).subspan(100));
        w.write(s, 0, std::span<const uint8_t>(enc).first(100));
        w.bind("p", w.end_tensor(s));
        finish_minimal(w);
        return test::read_bytes(dir.file(name));
    };
    // 0: the smallest header; 64 KiB: room to spare (J padded with spaces); 5000: rounded up to
    // 8192, enough; 4096 with a 2-file limit: parts copied from behind the room.
    const std::vector<uint8_t> smallest = write("a.ninfer", {});
    const std::vector<uint8_t> roomy = write("b.ninfer", {.header_reserve = 65536});
    const std::vector<uint8_t> rounded = write("c.ninfer", {.header_reserve = 5000});
    write("d.ninfer", {.file_size_limit = 16384, .header_reserve = 4096});
    CHECK(smallest.size() == 4096 + enc.size() + 2);
    CHECK(roomy.size() == 65536 + enc.size() + 2);
    CHECK(rounded.size() == 8192 + enc.size() + 2);
    CHECK(std::equal(enc.begin(), enc.end(), roomy.begin() + 65536));
    for (const char* name : {"a.ninfer", "b.ninfer", "c.ninfer", "d.ninfer"}) {
        auto a = Artifact::open(dir.file(name));
        const StoredTensor& t = a->tensors()[0];
        REQUIRE(t.bytes == enc.size());
        CHECK(std::memcmp(t.data, enc.data(), enc.size()) == 0);
    }
    CHECK(std::filesystem::exists(dir.file("d.ninfer.part-0001")));
}
