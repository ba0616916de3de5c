// ninfer tests - artifact payload checksums: the writer records metadata.payload_crc32c, the
// verifier accepts an intact file, names the corrupt tensor or resource, and refuses a malformed
// or partial member; a file without the member (upstream's) reports that nothing was checked.
#include "core/artifact/artifact.h"
#include "core/artifact/checksums.h"
#include "core/artifact/writer.h"
#include "core/util/crc32c.h"
#include "core/util/error.h"
#include "tests/unit/artifact/artifact_test_util.h"

#include <catch2/catch.hpp>

#include <algorithm>

using namespace ninfer;
using namespace ninfer::core;
using Catch::Matchers::Contains;
using ninfer::test::ScratchDir;

namespace {

// Offset of `needle` in the file's bytes (each occurs once in the minimal artifact).
std::string as_string(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

size_t find_bytes(const std::vector<uint8_t>& file, std::string_view needle) {
    size_t at = as_string(file).find(needle);
    REQUIRE(at != std::string::npos);
    return at;
}

} // namespace

TEST_CASE("checksums: the writer records each object's CRC-32C and an intact file verifies", "[checksums]") {
    ScratchDir dir;
    test::write_minimal(dir.file("m.ninfer"));
    auto a = Artifact::open(dir.file("m.ninfer"));
    const StoredTensor& t = a->tensors().at(0);
    const ArtifactResource& r = a->resources().at("resource/text/tokenizer.json");
    char expect_t[9], expect_r[9];
    std::snprintf(expect_t, sizeof expect_t, "%08x", crc32c_extend(0, t.data, t.bytes));
    std::snprintf(expect_r, sizeof expect_r, "%08x", crc32c_extend(0, r.data, r.bytes));
    CHECK_THAT(a->metadata_json(), Contains(std::string("\"payload_crc32c\":{\"weight/000000\":\"") + expect_t +
                                            "\",\"resource/text/tokenizer.json\":\"" + expect_r + "\"}"));
    CHECK(a->metadata_name() == "tiny"); // the caller's members are kept
    for (unsigned threads : {1u, 3u}) {
        PayloadVerifyResult v = verify_payload_checksums(*a, threads);
        CHECK(v.has_checksums);
        CHECK(v.n_objects == 2);
        CHECK(v.n_bytes == t.bytes + r.bytes);
    }
}

TEST_CASE("checksums: a flipped payload byte is reported with the tensor's id and binding", "[checksums]") {
    ScratchDir dir;
    const std::string path = dir.file("m.ninfer");
    test::write_minimal(path);
    std::vector<uint8_t> file = test::read_bytes(path);
    auto a = Artifact::open(path);
    const StoredTensor& t = a->tensors().at(0);
    const size_t at = find_bytes(file, std::string_view(reinterpret_cast<const char*>(t.data), t.bytes));
    a.reset();
    file[at + 3] ^= 0x10;
    test::write_bytes(path, file);
    auto corrupt = Artifact::open(path); // the reader alone cannot tell
    CHECK_THROWS_WITH(verify_payload_checksums(*corrupt, 2),
                      Contains("payload checksum mismatch: tensor weight/000000 (bound as p): stored crc32c") &&
                          Contains("the file is corrupt"));
}

TEST_CASE("checksums: a corrupt resource is named", "[checksums]") {
    ScratchDir dir;
    const std::string path = dir.file("m.ninfer");
    test::write_minimal(path);
    std::vector<uint8_t> file = test::read_bytes(path);
    file[file.size() - 1] = '!'; // the tokenizer resource "{}" is the last payload object
    test::write_bytes(path, file);
    auto a = Artifact::open(path);
    CHECK_THROWS_WITH(verify_payload_checksums(*a, 1), Contains("resource resource/text/tokenizer.json: stored crc32c"));
}

TEST_CASE("checksums: without the member nothing is checked; a malformed member is refused", "[checksums]") {
    ScratchDir dir;
    const std::string path = dir.file("m.ninfer");
    test::write_minimal(path);
    const std::vector<uint8_t> original = test::read_bytes(path);
    const std::string text = as_string(original);
    const size_t member = text.find("\"payload_crc32c\":");
    REQUIRE(member != std::string::npos);
    const size_t member_end = text.find('}', member) + 2; // the object and its trailing comma

    std::vector<uint8_t> stripped = original; // same length: JSON whitespace in place of the member
    std::fill(stripped.begin() + long(member), stripped.begin() + long(member_end), ' ');
    test::write_bytes(path, stripped);
    PayloadVerifyResult v = verify_payload_checksums(*Artifact::open(path), 1);
    CHECK_FALSE(v.has_checksums);
    CHECK(v.n_objects == 0);

    std::vector<uint8_t> bad_hex = original;
    bad_hex[text.find("\"", text.find("weight/000000\":", member) + 15) + 1] = 'g';
    test::write_bytes(path, bad_hex);
    CHECK_THROWS_WITH(verify_payload_checksums(*Artifact::open(path), 1),
                      Contains("payload_crc32c: object weight/000000: not 8 lowercase hex digits"));

    std::vector<uint8_t> renamed = original; // the checksum names an object that does not exist
    renamed[text.find("weight/000000", member) + 12] = '9';
    test::write_bytes(path, renamed);
    CHECK_THROWS_WITH(verify_payload_checksums(*Artifact::open(path), 1), Contains("names object weight/000009"));
}

TEST_CASE("checksums: callers cannot set the writer's own metadata member", "[checksums]") {
    ScratchDir dir;
    ArtifactWriter w(dir.file("x.ninfer"), {});
    CHECK_THROWS_WITH(w.set_metadata_json(R"({"name":"x","payload_crc32c":{}})"), Contains("written by the writer itself"));
}
