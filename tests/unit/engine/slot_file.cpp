// ninfer tests - slot files (version 2, tagged sections): round trip on both I/O paths, every
// refusal (truncation at every byte, bad tags, bad lengths, an older version), kill -9 during a save.
#include "core/util/crc32c.h"
#include "core/engine/slot_file.h"
#include "core/util/error.h"
#include "temp_dir.h"

#include <catch2/catch.hpp>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <filesystem>
#include <random>
#include <sys/wait.h>
#include <unistd.h>

using namespace ninfer;
using namespace ninfer::core;
using ninfer::test::TempDir;

namespace {

SlotIdentity identity() {
    SlotIdentity id;
    id.artifact_id = artifact_id_from_hex("00112233445566778899aabbccddeeff");
    id.model_id = "tiny-test";
    id.kv_dtype = KvDtype::Bf16;
    id.kv_bytes_per_token = 96;
    id.gdn_bytes = 5000;
    id.max_context = 4096;
    return id;
}

LaneImage image(uint32_t n_tokens, uint32_t seed, const SlotIdentity& id = identity()) {
    std::mt19937 rng(seed);
    LaneImage img;
    img.kv_dtype = id.kv_dtype;
    for (uint32_t i = 0; i < n_tokens; ++i) img.tokens.push_back(int32_t(rng() % 1000));
    for (auto& b : img.add_section(LaneSectionTag::Kv, id.kv_bytes_per_token * n_tokens)) b = uint8_t(rng());
    for (auto& b : img.add_section(LaneSectionTag::Gdn, id.gdn_bytes)) b = uint8_t(rng());
    return img;
}

bool same(const LaneImage& a, const LaneImage& b) { return a == b; }

constexpr uint64_t kHeaderCrcAt = kSlotHeaderBytes - 4;
// Directory entry i (tokens 0, kv 1, gdn 2 as written): u32 tag, u32 flags, u64 length, u32 crc.
constexpr uint64_t entry_at(int i) { return 128 + 24 * uint64_t(i); }

void patch(const std::string& path, uint64_t offset, const void* bytes, size_t n) {
    int fd = ::open(path.c_str(), O_WRONLY);
    REQUIRE(fd >= 0);
    REQUIRE(::pwrite(fd, bytes, n, off_t(offset)) == ssize_t(n));
    ::close(fd);
}

// Rewrites a header field and fixes the header checksum, as a deliberate forger would.
template <typename T> void patch_header(const std::string& path, uint64_t offset, T value) {
    std::vector<uint8_t> h(kSlotHeaderBytes);
    int fd = ::open(path.c_str(), O_RDWR);
    REQUIRE(::pread(fd, h.data(), h.size(), 0) == ssize_t(h.size()));
    std::memcpy(&h[offset], &value, sizeof value);
    uint32_t crc = crc32c_extend(0, h.data(), kHeaderCrcAt);
    std::memcpy(&h[kHeaderCrcAt], &crc, 4);
    REQUIRE(::pwrite(fd, h.data(), h.size(), 0) == ssize_t(h.size()));
    ::close(fd);
}

std::string refusal(const std::string& path, const SlotIdentity& id) {
    try {
        slot_file_read(path, id, FileIoMode::Plain);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

std::vector<std::string> names_in(const std::string& dir) {
    std::vector<std::string> out;
    for (auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().filename().string());
    return out;
}

} // namespace

TEST_CASE("crc32c matches the Castagnoli check value on both paths", "[slot_file]") {
    const char* s = "123456789";
    CHECK(crc32c_extend(0, s, 9) == 0xE3069283u);
    CHECK(crc32c_extend_portable(0, s, 9) == 0xE3069283u);
    std::vector<uint8_t> big(100003);
    for (size_t i = 0; i < big.size(); ++i) big[i] = uint8_t(i * 131 + 7);
    uint32_t whole = crc32c_extend(0, big.data(), big.size());
    CHECK(crc32c_extend(crc32c_extend(0, big.data(), 5001), big.data() + 5001, big.size() - 5001) == whole);
    CHECK(crc32c_extend_portable(0, big.data(), big.size()) == whole);
}

TEST_CASE("slot files round-trip through io_uring and pwrite, in any pairing", "[slot_file]") {
    TempDir dir;
    SlotIdentity id = identity();
    LaneImage img = image(300, 1);
    for (FileIoMode w : {FileIoMode::Uring, FileIoMode::Plain})
        for (FileIoMode r : {FileIoMode::Uring, FileIoMode::Plain}) {
            std::string path = slot_file_path(dir.path, "conv-1");
            SlotFileStats ws = slot_file_write(path, id, img, w);
            CHECK(ws.bytes == kSlotHeaderBytes + 300 * 4 + 300 * 96 + 5000);
            CHECK(std::filesystem::file_size(path) == ws.bytes);
            SlotFileStats rs;
            LaneImage back = slot_file_read(path, id, r, &rs);
            CHECK(same(back, img));
            CHECK(rs.n_tokens == 300);
        }
    // Overwriting keeps only the final name: no temp litter.
    CHECK(names_in(dir.path) == std::vector<std::string>{"conv-1.nslot"});
    CHECK((std::filesystem::status(slot_file_path(dir.path, "conv-1")).permissions() & std::filesystem::perms::all) ==
          (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write | std::filesystem::perms::group_read));
}

TEST_CASE("the environment variable forces the pwrite path", "[slot_file]") {
    // file_io_mode_default() is probed once per process, so ask a child with the variable set.
    pid_t pid = ::fork();
    if (pid == 0) {
        ::setenv("NINFER_NO_IO_URING", "1", 1);
        _exit(file_io_mode_default() == FileIoMode::Plain && !file_io_mode_note().empty() ? 0 : 1);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
}

TEST_CASE("slot_file_names lists saved names sorted, without temps, hidden or other files", "[slot_file]") {
    TempDir dir;
    SlotIdentity id = identity();
    for (const char* name : {"b-2", "a-1", "c"}) slot_file_write(slot_file_path(dir.path, name), id, image(3, 1), FileIoMode::Plain);
    for (const char* other : {".x.nslot.tmp.123", ".hidden.nslot", "notes.txt", "d.nslot.bak"})
        std::filesystem::copy_file(slot_file_path(dir.path, "c"), dir.path + "/" + other);
    CHECK(slot_file_names(dir.path) == std::vector<std::string>{"a-1", "b-2", "c"});
    CHECK(slot_file_names(dir.path + "/missing").empty());
}

TEST_CASE("saving an empty lane is refused", "[slot_file]") {
    TempDir dir;
    LaneImage empty;
    CHECK_THROWS_WITH(slot_file_write(slot_file_path(dir.path, "x"), identity(), empty, FileIoMode::Plain),
                      Catch::Contains("empty"));
    CHECK(names_in(dir.path).empty());
}

TEST_CASE("foreign, mismatched, corrupted and truncated slot files are refused with a reason", "[slot_file]") {
    TempDir dir;
    SlotIdentity id = identity();
    std::string path = slot_file_path(dir.path, "s");
    LaneImage img = image(64, 2);
    auto fresh = [&] { slot_file_write(path, id, img, FileIoMode::Plain); };

    fresh();
    REQUIRE(refusal(path, id).empty());

    SlotIdentity other = id;
    other.artifact_id[0] ^= 1;
    CHECK_THAT(refusal(path, other), Catch::Contains("another model"));
    other = id;
    other.model_id = "other-model";
    CHECK_THAT(refusal(path, other), Catch::Contains("another model"));
    other = id;
    other.kv_dtype = KvDtype::Fp8;
    CHECK_THAT(refusal(path, other), Catch::Contains("KV cache dtype bf16 differs"));
    other = id;
    other.gdn_bytes = 4999;
    CHECK_THAT(refusal(path, other), Catch::Contains("section gdn is 5000 bytes, this model's layout needs 4999"));
    other = id;
    other.kv_bytes_per_token = 97;
    CHECK_THAT(refusal(path, other), Catch::Contains("KV bytes per token 96 do not match"));
    other = id;
    other.max_context = 63;
    CHECK_THAT(refusal(path, other), Catch::Contains("exceed max-context"));

    uint8_t flip = 0x5A;
    patch(path, kSlotHeaderBytes + 64 * 4 + 10, &flip, 1);
    CHECK_THAT(refusal(path, id), Catch::Contains("kv section checksum mismatch"));

    fresh();
    patch(path, 112, &flip, 1); // a header byte without fixing its checksum
    CHECK_THAT(refusal(path, id), Catch::Contains("header checksum"));

    fresh();
    patch(path, 0, "NOTASLOT", 8);
    CHECK_THAT(refusal(path, id), Catch::Contains("bad magic"));

    fresh();
    patch_header<uint32_t>(path, 8, 3);
    CHECK_THAT(refusal(path, id), Catch::Contains("format version 3 is not supported: this ninferd reads version 2"));

    fresh();
    REQUIRE(::truncate(path.c_str(), off_t(std::filesystem::file_size(path) - 1)) == 0);
    CHECK_THAT(refusal(path, id), Catch::Contains("truncated"));
    REQUIRE(::truncate(path.c_str(), 100) == 0);
    CHECK_THAT(refusal(path, id), Catch::Contains("truncated"));

    fresh();
    REQUIRE(::truncate(path.c_str(), off_t(std::filesystem::file_size(path) + 7)) == 0);
    CHECK_THAT(refusal(path, id), Catch::Contains("7 trailing bytes"));

    // A forged header claiming a huge sequence is refused from the header alone (nothing allocated).
    fresh();
    patch_header<uint64_t>(path, 104, 1ull << 40);
    CHECK_THAT(refusal(path, id), Catch::Contains("exceed max-context"));

    CHECK_THAT(refusal(dir.path + "/missing.nslot", id), Catch::Contains("No such file"));
}

// A version-1 header as the first ninferd wrote it (fixed tokens / kv / gdn payload, header crc at 148).
void write_version1(const std::string& path) {
    std::vector<uint8_t> h(kSlotHeaderBytes + 64, 0);
    std::memcpy(h.data(), "NINFSLOT", 8);
    uint32_t version = 1, header_bytes = uint32_t(kSlotHeaderBytes);
    std::memcpy(&h[8], &version, 4);
    std::memcpy(&h[12], &header_bytes, 4);
    uint32_t crc = crc32c_extend(0, h.data(), 148);
    std::memcpy(&h[148], &crc, 4);
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(::pwrite(fd, h.data(), h.size(), 0) == ssize_t(h.size()));
    ::close(fd);
}

TEST_CASE("a version-1 slot file is refused with a message naming both versions", "[slot_file]") {
    TempDir dir;
    std::string path = slot_file_path(dir.path, "old");
    write_version1(path);
    std::string why = refusal(path, identity());
    CHECK_THAT(why, Catch::Contains("format version 1 is not supported: this ninferd reads version 2 only"));
    CHECK_THAT(why, Catch::Contains("save the lane again"));
}

TEST_CASE("a slot file cut at any byte is refused as truncated", "[slot_file]") {
    TempDir dir;
    SlotIdentity id = identity();
    id.kv_bytes_per_token = 8;
    id.gdn_bytes = 24;
    std::string whole = slot_file_path(dir.path, "whole"), cut = slot_file_path(dir.path, "cut");
    slot_file_write(whole, id, image(5, 3, id), FileIoMode::Plain);
    uint64_t size = std::filesystem::file_size(whole);
    REQUIRE(size == kSlotHeaderBytes + 5 * 4 + 5 * 8 + 24);
    int n_refused = 0;
    for (uint64_t n = 0; n < size; ++n) {
        std::filesystem::copy_file(whole, cut, std::filesystem::copy_options::overwrite_existing);
        REQUIRE(::truncate(cut.c_str(), off_t(n)) == 0);
        std::string why = refusal(cut, id);
        INFO("cut at " << n << ": " << why);
        CHECK_THAT(why, Catch::Contains("truncated"));
        n_refused += !why.empty();
    }
    CHECK(n_refused == int(size));
    CHECK(refusal(whole, id).empty());
}

TEST_CASE("section tags: unknown required refused, unknown optional skipped, duplicates and gaps refused",
          "[slot_file]") {
    TempDir dir;
    SlotIdentity id = identity();
    std::string path = slot_file_path(dir.path, "tags");
    const LaneImage plain = image(40, 4);

    LaneImage newer = plain; // as a later ninfer might write it
    for (uint8_t& b : newer.add_section(LaneSectionTag(99), 300, false)) b = 0xAB;
    slot_file_write(path, id, newer, FileIoMode::Plain);
    CHECK(std::filesystem::file_size(path) == kSlotHeaderBytes + 40 * 4 + 40 * 96 + 5000 + 300);
    CHECK(same(slot_file_read(path, id, FileIoMode::Plain), plain)); // the optional section is dropped

    newer.sections.back().required = true;
    slot_file_write(path, id, newer, FileIoMode::Plain);
    CHECK_THAT(refusal(path, id), Catch::Contains("needs the tag 99 section, which this ninferd cannot restore"));

    slot_file_write(path, id, plain, FileIoMode::Plain);
    patch_header<uint32_t>(path, entry_at(2), uint32_t(LaneSectionTag::Kv)); // gdn relabelled kv
    CHECK_THAT(refusal(path, id), Catch::Contains("two kv sections"));

    slot_file_write(path, id, plain, FileIoMode::Plain);
    patch_header<uint32_t>(path, entry_at(1) + 4, 3u); // kv with an unknown flag bit
    CHECK_THAT(refusal(path, id), Catch::Contains("unknown flags"));

    LaneImage no_gdn = plain;
    no_gdn.sections.pop_back();
    slot_file_write(path, id, no_gdn, FileIoMode::Plain);
    CHECK_THAT(refusal(path, id), Catch::Contains("no gdn section"));

    slot_file_write(path, id, plain, FileIoMode::Plain);
    patch_header<uint32_t>(path, 120, 0u);
    CHECK_THAT(refusal(path, id), Catch::Contains("0 sections"));
    patch_header<uint32_t>(path, 120, kSlotMaxSections + 1);
    CHECK_THAT(refusal(path, id), Catch::Contains("at most"));
}

TEST_CASE("section lengths are checked against the plan and the file before anything is allocated",
          "[slot_file]") {
    TempDir dir;
    SlotIdentity id = identity();
    std::string path = slot_file_path(dir.path, "lengths");
    LaneImage img = image(40, 5);
    for (uint8_t& b : img.add_section(LaneSectionTag(77), 64, false)) b = 1;
    auto fresh = [&] { slot_file_write(path, id, img, FileIoMode::Plain); };

    fresh();
    patch_header<uint64_t>(path, entry_at(1) + 8, 1ull << 60); // a forged kv length
    CHECK_THAT(refusal(path, id), Catch::Contains("section kv is 1152921504606846976 bytes, this model's layout needs 3840"));
    fresh();
    patch_header<uint64_t>(path, entry_at(0) + 8, 40 * 4 - 4); // tokens shorter than n_tokens
    CHECK_THAT(refusal(path, id), Catch::Contains("section tokens is 156 bytes"));
    fresh();
    patch_header<uint64_t>(path, entry_at(3) + 8, ~0ull); // an unknown optional section claims everything
    CHECK_THAT(refusal(path, id), Catch::Contains("tag 77 section ends beyond the file"));
    fresh();
    patch_header<uint64_t>(path, entry_at(3) + 8, 63); // one byte short: the file has one left over
    CHECK_THAT(refusal(path, id), Catch::Contains("1 trailing bytes"));
    fresh();
    uint8_t flip = 0x11;
    patch(path, kSlotHeaderBytes + 40 * 4 + 40 * 96 + 7, &flip, 1); // inside gdn
    CHECK_THAT(refusal(path, id), Catch::Contains("gdn section checksum mismatch"));
}

TEST_CASE("kill -9 during a save leaves the old file or the new one under the name", "[slot_file]") {
    SlotIdentity id = identity();
    id.gdn_bytes = 6u << 20; // big enough that a save takes a while
    LaneImage a = image(2000, 10, id), b = image(3000, 11, id);
    std::mt19937 rng(7);
    for (FileIoMode mode : {FileIoMode::Uring, FileIoMode::Plain}) {
        int seen_a = 0, seen_b = 0;
        for (int round = 0; round < 12; ++round) {
            TempDir dir;
            std::string path = slot_file_path(dir.path, "victim");
            bool with_old = round % 3 != 0;
            if (with_old) slot_file_write(path, id, a, mode);
            pid_t pid = ::fork();
            if (pid == 0) {
                for (;;) slot_file_write(path, id, b, mode); // killed somewhere in here
            }
            ::usleep(useconds_t(rng() % 40000));
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
            if (!std::filesystem::exists(path)) {
                CHECK_FALSE(with_old); // the old file never disappears
                continue;
            }
            LaneImage got = slot_file_read(path, id, mode); // throws on a torn file
            if (same(got, a)) ++seen_a;
            else if (same(got, b)) ++seen_b;
            else FAIL("slot file holds neither the old nor the new image");
            remove_stale_temps(dir.path, ".nslot");
            CHECK(names_in(dir.path) == std::vector<std::string>{"victim.nslot"});
        }
        INFO("mode " << file_io_mode_name(mode) << " old " << seen_a << " new " << seen_b);
        CHECK(seen_a + seen_b > 0);
    }
}

TEST_CASE("the optional MTP section survives a slot file, its checksum checked", "[slot_file]") {
    TempDir dir;
    SlotIdentity id = identity();
    std::string path = slot_file_path(dir.path, "mtp");
    LaneImage img = image(40, 6);
    std::mt19937 rng(6);
    for (uint8_t& b : img.add_section(LaneSectionTag::MtpKv, 8 + 37 * 12 + 3 * 64, false)) b = uint8_t(rng());
    slot_file_write(path, id, img, FileIoMode::Plain);
    CHECK(same(slot_file_read(path, id, FileIoMode::Plain), img)); // length free, bytes intact
    const uint64_t mtp_at = kSlotHeaderBytes + 40 * 4 + 40 * 96 + 5000;
    const uint8_t flipped = uint8_t(img.section(LaneSectionTag::MtpKv)[10] ^ 0xFF);
    patch(path, mtp_at + 10, &flipped, 1);
    CHECK_THAT(refusal(path, id), Catch::Contains("mtp_kv section checksum mismatch"));
}
