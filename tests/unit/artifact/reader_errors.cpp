// ninfer tests - every reader check of docs/ARTIFACT_FORMAT.md §6 refuses a broken entry with a
// one-line message.
#include "core/artifact/artifact.h"
#include "core/formats/codec.h"
#include "core/util/error.h"
#include "tests/unit/artifact/artifact_test_util.h"

#include <catch2/catch.hpp>

#include <cstring>

using namespace ninfer;
using namespace ninfer::core;
using Catch::Matchers::Contains;
using ninfer::test::ScratchDir;

namespace {

// Payload: bf16 [2,2] "w" at 0 (8 bytes), resource "r" = "{}" at 8; T = 10.
const std::string kValid =
    R"({"components":{"text":{"config":{"a":1},"resources":{"tokenizer.json":"r"}}},)"
    R"("objects":[{"id":"w","kind":"tensor","shape":[2,2],"format":"bf16","layout":"contiguous_le_v1","offset":0,"bytes":8},)"
    R"({"id":"r","kind":"resource","encoding":"raw_bytes_v1","offset":8,"bytes":2}],)"
    R"("bindings":{"p":{"object":"w"}},"uses":[],"metadata":{"name":"x"},"provenance":{},)"
    R"("files":[{"path":null,"payload_bytes":10}]})";

std::vector<uint8_t> payload() { return {0, 0, 0x80, 0x3F, 0, 0x40, 0x80, 0xBF, '{', '}'}; }

std::vector<uint8_t> entry_bytes(const std::string& json, const std::vector<uint8_t>& pay,
                                 uint8_t version = 3) {
    const uint64_t e = (32 + json.size() + 4095) / 4096 * 4096;
    std::vector<uint8_t> b(e, 0);
    const uint8_t magic[8] = {'N', 'I', 'N', 'F', 'E', 'R', 0, version};
    std::memcpy(b.data(), magic, 8);
    const uint64_t j = json.size();
    std::memcpy(b.data() + 8, &j, 8);
    std::memset(b.data() + 16, 0x11, 16);
    std::memcpy(b.data() + 32, json.data(), json.size());
    b.insert(b.end(), pay.begin(), pay.end());
    return b;
}

std::string replaced(std::string s, const std::string& from, const std::string& to) {
    const size_t at = s.find(from);
    REQUIRE(at != std::string::npos);
    return s.replace(at, from.size(), to);
}

// Writes an entry with `json` and the standard payload and returns the reader's error.
std::string open_error(const std::vector<uint8_t>& bytes) {
    ScratchDir dir;
    const std::string path = dir.file("e.ninfer");
    test::write_bytes(path, bytes);
    try {
        Artifact::open(path);
    } catch (const ninfer::Error& e) {
        const std::string msg = e.what();
        CHECK(msg.find('\n') == std::string::npos);
        CHECK(msg.rfind("artifact: " + path + ": ", 0) == 0);
        return msg;
    }
    FAIL("artifact opened without error");
    return {};
}

std::string json_error(const std::string& json) { return open_error(entry_bytes(json, payload())); }

} // namespace

TEST_CASE("the hand-built reference entry is valid", "[reader_errors]") {
    ScratchDir dir;
    test::write_bytes(dir.file("ok.ninfer"), entry_bytes(kValid, payload()));
    auto a = Artifact::open(dir.file("ok.ninfer"));
    CHECK(a->binding("p").shape == std::vector<uint64_t>{2, 2});
    std::vector<float> v(4);
    decode_rows(a->tensors()[0], 0, 2, v.data());
    CHECK(v == std::vector<float>{0.0f, 1.0f, 2.0f, -1.0f});
    CHECK(a->component("text").config_json == R"({"a":1})");
    CHECK(a->artifact_id_hex() == std::string(32, '1'));
    CHECK_FALSE(a->is_synthetic());
}

TEST_CASE("framing errors", "[reader_errors]") {
    auto good = entry_bytes(kValid, payload());
    auto cut = good;
    cut.pop_back();
    CHECK_THAT(open_error(cut), Contains("truncated: entry is"));
    auto longer = good;
    longer.push_back(0);
    CHECK_THAT(open_error(longer), Contains("entry length"));
    CHECK_THAT(open_error(std::vector<uint8_t>(good.begin(), good.begin() + 20)), Contains("truncated"));
    CHECK_THAT(open_error(std::vector<uint8_t>(good.begin(), good.begin() + 5)), Contains("truncated"));
    CHECK_THAT(open_error(std::vector<uint8_t>(good.begin(), good.begin() + 200)),
               Contains("truncated: directory declares"));
    auto magic = good;
    magic[0] = 'X';
    CHECK_THAT(open_error(magic), Contains("wrong magic"));
    CHECK_THAT(open_error(entry_bytes(kValid, payload(), 1)), Contains("NInfer v1 artifact is not supported; upgrade"));
    CHECK_THAT(open_error(entry_bytes(kValid, payload(), 2)), Contains("NInfer v2 artifact is not supported; upgrade"));
    auto part = good;
    std::memcpy(part.data(), "NINPRT", 6);
    CHECK_THAT(open_error(part), Contains("continuation part file"));
    auto zero = good;
    std::memset(zero.data() + 8, 0, 8);
    CHECK_THAT(open_error(zero), Contains("json_bytes must be positive"));
}

TEST_CASE("JSON syntax, duplicates, NaN and number types", "[reader_errors]") {
    CHECK_THAT(json_error(replaced(kValid, "\"uses\":[]", "\"uses\":[")), Contains("invalid JSON directory"));
    CHECK_THAT(json_error(replaced(kValid, "{\"a\":1}", "{\"a\":1,\"a\":2}")), Contains("duplicate JSON member \"a\""));
    CHECK_THAT(json_error(replaced(kValid, "\"id\":\"r\",", "\"id\":\"r\",\"id\":\"r\",")),
               Contains("duplicate JSON member \"id\""));
    CHECK_THAT(json_error(replaced(kValid, "{\"a\":1}", "{\"a\":NaN}")), Contains("invalid JSON directory"));
    CHECK_THAT(json_error(replaced(kValid, "{\"a\":1}", "{\"a\":Infinity}")), Contains("invalid JSON directory"));
    CHECK_THAT(json_error(replaced(kValid, "\"bytes\":8}", "\"bytes\":8.0}")), Contains("bytes must be a nonnegative integer"));
    CHECK_THAT(json_error(replaced(kValid, "\"bytes\":8}", "\"bytes\":true}")), Contains("bytes must be a nonnegative integer"));
    CHECK_THAT(json_error(replaced(kValid, "\"offset\":0", "\"offset\":-256")), Contains("offset must be a nonnegative integer"));
    CHECK_THAT(json_error(replaced(kValid, "\"payload_bytes\":10", "\"payload_bytes\":1e1")),
               Contains("payload_bytes must be a nonnegative integer"));
    CHECK_THAT(json_error(replaced(kValid, "\"shape\":[2,2]", "\"shape\":[2,0]")), Contains("must be positive"));
    CHECK_THAT(json_error(replaced(kValid, "\"metadata\":{\"name\":\"x\"}", "\"metadata\":{\"name\":\"\"}")),
               Contains("metadata.name must be a nonempty string"));
    CHECK_THAT(json_error(replaced(kValid, "\"id\":\"w\"", "\"id\":\"w\\u0000\"")), Contains("U+0000"));
}

TEST_CASE("closed member sets", "[reader_errors]") {
    CHECK_THAT(json_error(replaced(kValid, "\"uses\":[],", "")), Contains("missing member \"uses\""));
    CHECK_THAT(json_error(replaced(kValid, "\"uses\":[],", "\"uses\":[],\"extra\":1,")), Contains("unknown member \"extra\""));
    CHECK_THAT(json_error(replaced(kValid, "\"layout\":\"contiguous_le_v1\",", "")), Contains("missing member \"layout\""));
    CHECK_THAT(json_error(replaced(kValid, "\"encoding\":\"raw_bytes_v1\",", "\"encoding\":\"raw_bytes_v1\",\"shape\":[2],")),
               Contains("unknown member \"shape\""));
    CHECK_THAT(json_error(replaced(kValid, "\"kind\":\"resource\"", "\"kind\":\"blob\"")), Contains("kind must be"));
    CHECK_THAT(json_error(replaced(kValid, "{\"object\":\"w\"}", "{\"object\":\"w\",\"range\":[0,4]}")),
               Contains("unknown member \"range\""));
    CHECK_THAT(json_error(replaced(kValid, "\"config\":{\"a\":1},", "")), Contains("missing member \"config\""));
    CHECK_THAT(json_error(replaced(kValid, "\"config\":{\"a\":1}", "\"config\":[1]")), Contains("config must be an object"));
    CHECK_THAT(json_error(replaced(kValid, "{\"path\":null,\"payload_bytes\":10}", "{\"path\":null,\"payload_bytes\":10,\"x\":0}")),
               Contains("unknown member \"x\""));
}

TEST_CASE("object placement: overlap, order, alignment, bounds, sizes, formats", "[reader_errors]") {
    CHECK_THAT(json_error(replaced(kValid, "\"offset\":8", "\"offset\":6")), Contains("object r overlaps or is out of order"));
    // Out of order: the resource listed first at 8, the tensor after it at 0.
    const std::string swapped =
        replaced(replaced(kValid, R"({"id":"w","kind":"tensor","shape":[2,2],"format":"bf16","layout":"contiguous_le_v1","offset":0,"bytes":8},)", ""),
                 R"("bytes":2}])", R"("bytes":2},{"id":"w","kind":"tensor","shape":[2,2],"format":"bf16","layout":"contiguous_le_v1","offset":0,"bytes":8}])");
    CHECK_THAT(json_error(swapped), Contains("object w overlaps or is out of order"));
    // Misaligned tensor: resource at 0, tensor at 2.
    std::string mis = replaced(replaced(swapped, "\"offset\":8", "\"offset\":0"), "\"offset\":0,\"bytes\":8", "\"offset\":2,\"bytes\":8");
    CHECK_THAT(json_error(mis), Contains("object w offset 2 is not 256-aligned"));
    CHECK_THAT(json_error(replaced(kValid, "\"offset\":8,\"bytes\":2", "\"offset\":8,\"bytes\":5")),
               Contains("object r extends beyond the payload"));
    CHECK_THAT(json_error(replaced(kValid, "\"offset\":0,\"bytes\":8", "\"offset\":0,\"bytes\":6")),
               Contains("object w stores 6 bytes; layout requires 8"));
    CHECK_THAT(json_error(replaced(kValid, "\"format\":\"bf16\"", "\"format\":\"q3_g64_fp16\"")),
               Contains("unknown tensor format q3_g64_fp16"));
    CHECK_THAT(json_error(replaced(kValid, "\"format\":\"bf16\"", "\"format\":\"BF16\"")), Contains("unknown tensor format BF16"));
    CHECK_THAT(json_error(replaced(kValid, "contiguous_le_v1", "row_split_k128_v1")),
               Contains("layout row_split_k128_v1 does not accept format bf16"));
    CHECK_THAT(json_error(replaced(kValid, "contiguous_le_v1", "contiguous-le-v1")), Contains("unknown tensor layout"));
    CHECK_THAT(json_error(replaced(kValid, "raw_bytes_v1", "raw-bytes-v1")), Contains("unknown resource encoding"));
    CHECK_THAT(json_error(replaced(kValid, "\"id\":\"r\"", "\"id\":\"w\"")), Contains("duplicate object id w"));
    CHECK_THAT(json_error(replaced(kValid, "\"shape\":[2,2]", "\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]")),
               Contains("rank 0 through 16"));
    CHECK_THAT(json_error(replaced(replaced(kValid, "\"objects\":[", "\"objects\":[]"), "{\"id\":\"w\"", "XX")),
               Contains("invalid JSON"));
}

TEST_CASE("cross references: bindings, components, uses, files", "[reader_errors]") {
    CHECK_THAT(json_error(replaced(kValid, "{\"object\":\"w\"}", "{\"object\":\"r\"}")), Contains("wrong object kind"));
    CHECK_THAT(json_error(replaced(kValid, "{\"object\":\"w\"}", "{\"object\":\"nope\"}")), Contains("missing object nope"));
    CHECK_THAT(json_error(replaced(kValid, "{\"object\":\"w\"}", "{\"parts\":[{\"object\":\"w\",\"range\":[0,5]}]}")),
               Contains("exceeds source logical elements"));
    CHECK_THAT(json_error(replaced(kValid, "{\"object\":\"w\"}", "{\"parts\":[{\"object\":\"w\",\"range\":[2,2]}]}")),
               Contains("exceeds source logical elements"));
    CHECK_THAT(json_error(replaced(kValid, "{\"object\":\"w\"}", "{\"parts\":[]}")), Contains("parts must be nonempty"));
    CHECK_THAT(json_error(replaced(kValid, "\"tokenizer.json\":\"r\"", "\"tokenizer.json\":\"w\"")), Contains("wrong object kind"));
    CHECK_THAT(json_error(replaced(kValid, "\"components\":{\"text\"", "\"components\":{\"vision\"")),
               Contains("components must contain \"text\""));
    CHECK_THAT(json_error(replaced(kValid, "\"components\":{", "\"components\":{\"mtp\":{\"config\":{},\"target\":\"dflash\"},")),
               Contains("missing target component dflash"));
    CHECK_THAT(json_error(replaced(kValid, "\"components\":{", "\"components\":{\"mtp\":{\"config\":{},\"proposal\":{\"domain\":\"full\"}},")),
               Contains("only text may declare proposal"));
    CHECK_THAT(json_error(replaced(kValid, "\"config\":{\"a\":1}", "\"config\":{},\"proposal\":{\"domain\":\"indexed\"}")),
               Contains("missing member \"rows\""));
    CHECK_THAT(json_error(replaced(kValid, "\"uses\":[]", "\"uses\":[{\"parameter\":\"q\",\"input\":\"i\"}]")),
               Contains("missing parameter q"));
    CHECK_THAT(json_error(replaced(kValid, "\"uses\":[]", "\"uses\":[{\"parameter\":\"p\",\"input\":\"i\"},{\"parameter\":\"p\",\"input\":\"i\"}]")),
               Contains("duplicate Use (p, i)"));
    CHECK_THAT(json_error(replaced(kValid, "\"uses\":[]", "\"uses\":[{\"parameter\":\"p\",\"input\":\"i\",\"activation_policy\":\"AllowA2\"}]")),
               Contains("unknown activation policy AllowA2"));
    CHECK_THAT(json_error(replaced(kValid, "\"uses\":[]", "\"uses\":[{\"parameter\":\"p\",\"input\":\"i\",\"auxiliaries\":{\"activation_input_divisor\":{\"object\":\"w\"}}}]")),
               Contains("must be one FP32 element"));
    CHECK_THAT(json_error(replaced(kValid, "{\"path\":null,", "{\"path\":\"e.ninfer\",")), Contains("files[0].path must be null"));
    CHECK_THAT(json_error(replaced(kValid, "\"payload_bytes\":10}]", "\"payload_bytes\":6},{\"path\":\"../x\",\"payload_bytes\":4}]")),
               Contains("invalid or duplicate sibling filename"));
    CHECK_THAT(json_error(replaced(kValid, "\"payload_bytes\":10}]", "\"payload_bytes\":6},{\"path\":\"e.ninfer\",\"payload_bytes\":4}]")),
               Contains("invalid or duplicate sibling filename"));
    CHECK_THAT(json_error(replaced(kValid, "\"payload_bytes\":10}]", "\"payload_bytes\":10},{\"path\":\"missing.part\",\"payload_bytes\":4}]")),
               Contains("missing.part"));
}

TEST_CASE("quantized parts must cover whole rows", "[reader_errors]") {
    std::vector<uint64_t> shape = {2, 32};
    auto q = encode(TensorFormat::Q8G32Fp16, shape, std::vector<float>(64, 1.0f));
    const std::string json =
        R"({"components":{"text":{"config":{}}},"objects":[{"id":"q","kind":"tensor","shape":[2,32],"format":"q8_g32_fp16","layout":"row_split_k128_v1","offset":0,"bytes":)" +
        std::to_string(q.size()) + R"(}],"bindings":{"p":{"parts":[{"object":"q","range":[RANGE]}]}},"uses":[],"files":[{"path":null,"payload_bytes":)" +
        std::to_string(q.size()) + "}]}";
    CHECK_THAT(open_error(entry_bytes(replaced(json, "RANGE", "0,16"), q)), Contains("does not cover whole rows"));
    ScratchDir dir;
    test::write_bytes(dir.file("ok.ninfer"), entry_bytes(replaced(json, "RANGE", "32,64"), q));
    auto a = Artifact::open(dir.file("ok.ninfer"));
    CHECK(a->binding("p").shape == std::vector<uint64_t>{1, 32});
    CHECK(a->binding("p").pieces[0].elem_begin == 32);
    CHECK(a->metadata_json() == "{}");
}
