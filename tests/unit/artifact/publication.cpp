// ninfer tests - writer publication: sharding, refusing targets, force, no partial files.
#include "core/artifact/artifact.h"
#include "core/artifact/writer.h"
#include "core/formats/codec.h"
#include "core/util/error.h"
#include "tests/unit/artifact/artifact_test_util.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <numeric>

using namespace ninfer;
using namespace ninfer::core;
using Catch::Matchers::Contains;
using ninfer::test::ScratchDir;

namespace {

// docs/ARTIFACT_FORMAT.md §1.3's example: T = 27610 logical payload bytes split with L = 12288.
// fp32 [1000] tensors of 4000 bytes at 256-aligned offsets, then a resource to land on T.
uint64_t write_large(const std::string& path, uint64_t limit, std::vector<std::vector<float>>& values) {
    ArtifactWriter w(path, {false, limit});
    uint64_t cursor = 0;
    for (int i = 0; i < 6; ++i) {
        std::vector<float> v(1000);
        std::iota(v.begin(), v.end(), float(i * 1000));
        std::vector<uint64_t> shape = {1000};
        const std::string id = "weight/00000" + std::to_string(i);
        w.add_tensor(id, TensorFormat::Fp32, shape, encode(TensorFormat::Fp32, shape, v));
        w.bind("p" + std::to_string(i), id);
        values.push_back(v);
        cursor = (cursor + 255) / 256 * 256 + 4000;
    }
    std::string text(27610 - cursor, 'x');
    w.add_resource("resource/text/tokenizer.json", test::as_bytes(text));
    w.add_component("text", "{}", {}, {{"tokenizer.json", "resource/text/tokenizer.json"}});
    w.set_metadata_json(R"({"name":"large"})");
    CHECK(w.payload_bytes() == 27610);
    return w.finish();
}

} // namespace

TEST_CASE("multi-file split with L=12288, T=27610 gives entry + 3 parts", "[publication]") {
    ScratchDir dir;
    std::vector<std::vector<float>> values;
    const uint64_t written = write_large(dir.file("large.ninfer"), 12288, values);
    CHECK(dir.entries() == std::vector<std::string>{"large.ninfer", "large.ninfer.part-0001",
                                                    "large.ninfer.part-0002", "large.ninfer.part-0003"});
    const uint64_t sizes[] = {4096 + 8192, 4096 + 8192, 4096 + 8192, 4096 + 3034};
    const char* names[] = {"large.ninfer", "large.ninfer.part-0001", "large.ninfer.part-0002", "large.ninfer.part-0003"};
    uint64_t sum = 0;
    for (int i = 0; i < 4; ++i) {
        const auto bytes = test::read_bytes(dir.file(names[i]));
        CHECK(bytes.size() == sizes[i]);
        CHECK(bytes.size() <= 12288);
        sum += bytes.size();
        if (i > 0) {
            CHECK(std::memcmp(bytes.data(), "NINPRT\0\3", 8) == 0);
            CHECK(bytes[8] == i);
        }
    }
    CHECK(written == sum);
    auto a = Artifact::open(dir.file("large.ninfer"));
    CHECK(a->file_count() == 4);
    CHECK(a->file_bytes() == sum);
    CHECK(a->payload_bytes() == 27610);
    for (int i = 0; i < 6; ++i) { // tensors straddling files are materialised intact
        const WeightBinding& b = a->binding("p" + std::to_string(i));
        std::vector<float> out(1000);
        decode_rows(*b.pieces[0].tensor, 0, 1, out.data());
        CHECK(out == values[i]);
    }
    CHECK(a->resource("text", "tokenizer.json")->bytes == 27610 - (5 * 4096 + 4000)); // tensor i at 4096*i

    // Part damage is reported against the entry.
    auto part = test::read_bytes(dir.file("large.ninfer.part-0002"));
    auto bad = part;
    bad[20] ^= 1; // artifact_id
    test::write_bytes(dir.file("large.ninfer.part-0002"), bad);
    CHECK_THROWS_WITH(Artifact::open(dir.file("large.ninfer")), Contains("continuation header does not belong to this entry"));
    bad = part;
    bad[8] = 3; // part_index
    test::write_bytes(dir.file("large.ninfer.part-0002"), bad);
    CHECK_THROWS_WITH(Artifact::open(dir.file("large.ninfer")), Contains("continuation header does not belong to this entry"));
    bad = part;
    bad[0] = 'X';
    test::write_bytes(dir.file("large.ninfer.part-0002"), bad);
    CHECK_THROWS_WITH(Artifact::open(dir.file("large.ninfer")), Contains("wrong magic"));
    bad = part;
    bad.push_back(0);
    test::write_bytes(dir.file("large.ninfer.part-0002"), bad);
    CHECK_THROWS_WITH(Artifact::open(dir.file("large.ninfer")), Contains("continuation length"));
    std::filesystem::remove(dir.file("large.ninfer.part-0002"));
    CHECK_THROWS_WITH(Artifact::open(dir.file("large.ninfer")), Contains("cannot open part"));
}

TEST_CASE("an existing target is refused unless force", "[publication]") {
    ScratchDir dir;
    const std::string path = dir.file("t.ninfer");
    test::write_bytes(path, {'o', 'l', 'd'});
    CHECK_THROWS_WITH(test::write_minimal(path), Contains("target exists (use --force to replace it)"));
    CHECK(test::read_bytes(path) == std::vector<uint8_t>{'o', 'l', 'd'});
    CHECK(dir.entries() == std::vector<std::string>{"t.ninfer"}); // no temp left behind
    test::write_minimal(path, {true, 32'000'000'000ull});
    CHECK(Artifact::open(path)->metadata_name() == "tiny");
    CHECK(dir.entries() == std::vector<std::string>{"t.ninfer"});

    // A part name that exists is refused at publication, and nothing is published.
    const std::string large = dir.file("large.ninfer");
    test::write_bytes(large + ".part-0002", {'x'});
    std::vector<std::vector<float>> values;
    CHECK_THROWS_WITH(write_large(large, 12288, values), Contains("large.ninfer.part-0002 exists"));
    CHECK(dir.entries() == std::vector<std::string>{"large.ninfer.part-0002", "t.ninfer"});
}

TEST_CASE("no file under the final name unless finish succeeds", "[publication]") {
    ScratchDir dir;
    const std::string path = dir.file("p.ninfer");
    {
        ArtifactWriter w(path, {});
        std::vector<uint64_t> shape = {4};
        w.add_tensor("w", TensorFormat::Fp32, shape, encode(TensorFormat::Fp32, shape, std::vector<float>(4, 1.0f)));
        CHECK(dir.entries().size() == 1); // the payload temp, hidden
        CHECK(dir.entries()[0].rfind(".p.ninfer.", 0) == 0);
    } // destroyed before finish
    CHECK(dir.entries().empty());
    {
        ArtifactWriter w(path, {});
        std::vector<uint64_t> shape = {4};
        w.add_tensor("w", TensorFormat::Fp32, shape, encode(TensorFormat::Fp32, shape, std::vector<float>(4, 1.0f)));
        w.bind("p", "w");
        // No "text" component: finish fails and removes everything.
        CHECK_THROWS_WITH(w.finish(), Contains("needs a \"text\" component"));
        CHECK(dir.entries().empty());
        CHECK_THROWS_WITH(w.finish(), Contains("unusable"));
    }
    {
        ArtifactWriter w(path, {false, 4096}); // too small for header + payload per file
        std::vector<uint64_t> shape = {4};
        w.add_tensor("w", TensorFormat::Fp32, shape, encode(TensorFormat::Fp32, shape, std::vector<float>(4, 1.0f)));
        w.add_component("text", "{}");
        CHECK_THROWS_WITH(w.finish(), Contains("file_size_limit 4096"));
        CHECK(dir.entries().empty());
    }
}

TEST_CASE("writer refuses invalid input up front", "[publication]") {
    ScratchDir dir;
    ArtifactWriter w(dir.file("v.ninfer"), {});
    std::vector<uint64_t> shape = {2, 32};
    auto q = encode(TensorFormat::Q8G32Fp16, shape, std::vector<float>(64, 1.0f));
    CHECK_THROWS_WITH(w.add_tensor("q", TensorFormat::Q8G32Fp16, shape, std::span(q).first(q.size() - 1)),
                      Contains("layout requires"));
    w.add_tensor("q", TensorFormat::Q8G32Fp16, shape, q);
    CHECK_THROWS_WITH(w.add_tensor("q", TensorFormat::Q8G32Fp16, shape, q), Contains("duplicate object id q"));
    w.add_resource("r", test::as_bytes("abc"));
    CHECK_THROWS_WITH(w.bind("p", "r"), Contains("wrong object kind"));
    CHECK_THROWS_WITH(w.bind("p", "zz"), Contains("unknown object zz"));
    CHECK_THROWS_WITH(w.bind_parts("p", {{"q", 0, 16}}), Contains("does not cover whole rows"));
    CHECK_THROWS_WITH(w.bind_parts("p", {{"q", 0, 65}}), Contains("exceeds the 64 elements"));
    w.bind_rows("p", "q", 1, 2);
    CHECK_THROWS_WITH(w.bind("p", "q"), Contains("duplicate binding p"));
    CHECK_THROWS_WITH(w.add_component("text", "{\"a\":1,\"a\":2}"), Contains("duplicate JSON member"));
    CHECK_THROWS_WITH(w.add_component("text", "[1]"), Contains("config must be a JSON object"));
    CHECK_THROWS_WITH(w.add_component("mtp", "{}", "text", {}, R"({"domain":"full"})"), Contains("only text may declare proposal"));
    CHECK_THROWS_WITH(w.set_metadata_json(R"({"synthetic":true})"), Contains("must contain \"name\""));
    CHECK_THROWS_WITH(w.add_use({"p", "in", "AllowA2", {}}), Contains("unknown activation policy"));
    w.add_use({"p", "in", "A16Only", {}});
    CHECK_THROWS_WITH(w.add_use({"p", "in", "", {}}), Contains("duplicate Use"));
    w.add_component("text", "{}", {}, {{"tokenizer.json", "r"}});
    w.set_metadata_json(R"({"name":"v"})");
    w.finish();
    auto a = Artifact::open(dir.file("v.ninfer"));
    REQUIRE(a->uses().size() == 1);
    CHECK(a->uses()[0].activation_policy == "A16Only");
    CHECK(a->binding("p").shape == std::vector<uint64_t>{1, 32});
}
