// ninfer tests - artifact upgrade v1/v2 -> V3 on full-inventory 27B and 35B-A3B files, built sparse
// (the published sizes, ~17-23 GB, with only the directory and a few marker bytes on disk).
#include "core/artifact/artifact.h"
#include "core/artifact/upgrade.h"
#include "core/artifact/upgrade_inventory.h"
#include "core/formats/format.h"
#include "core/util/crc32c.h"
#include "core/util/error.h"
#include "core/util/json_writer.h"
#include "tests/unit/artifact/legacy_file.h"

#include <catch2/catch.hpp>

#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <map>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace ninfer;
using namespace ninfer::core;
using namespace ninfer::test;

namespace {

std::string read_at(const std::string& path, uint64_t offset, size_t n) {
    std::string s(n, '\0');
    int fd = ::open(path.c_str(), O_RDONLY);
    REQUIRE(::pread(fd, s.data(), n, off_t(offset)) == ssize_t(n));
    ::close(fd);
    return s;
}

struct TempDir {
    std::string path;
    TempDir() {
        char buf[] = "/tmp/ninfer-upgrade-XXXXXX";
        path = ::mkdtemp(buf);
    }
    ~TempDir() { std::filesystem::remove_all(path); }
};

uint64_t allocated_bytes(const std::string& path) {
    struct stat st;
    ::stat(path.c_str(), &st);
    return uint64_t(st.st_blocks) * 512;
}

void upgrade_and_check(const std::string& model_id, int version, uint64_t published_bytes, size_t n_bindings, size_t n_uses) {
    TempDir dir;
    std::string path = dir.path + "/model.ninfer";
    Built b = build_legacy(path, model_id, version);
    // docs/ARTIFACT_FORMAT.md §3.6: the published size, exactly
    if (version == 1) CHECK(b.file_bytes == published_bytes);
    // Markers: the first tensor's first bytes, the chat template, the very last byte.
    write_at(path, b.payload_start + b.offsets["text/token_embedding"], "EMBEDDING-MARKER");
    write_at(path, b.payload_start + b.offsets["frontend/chat_template.jinja"], "{% template %}");
    write_at(path, b.file_bytes - 4, "TAIL");

    uint64_t last_done = 0, calls = 0;
    ArtifactUpgradeOptions opt;
    opt.progress = [&](uint64_t done, uint64_t total) {
        CHECK(done >= last_done);
        CHECK(total == b.file_bytes - b.payload_start);
        last_done = done;
        ++calls;
    };
    ArtifactUpgradeResult r = artifact_upgrade(path, "", opt);
    CHECK(r.from_version == version);
    CHECK(r.n_bindings == n_bindings);
    CHECK(r.n_uses == n_uses);
    CHECK(r.n_files == 1);
    CHECK(last_done == r.payload_bytes);
    CHECK(calls > 0);
    CHECK(r.copied_bytes < (64u << 20)); // holes were skipped, not copied
    CHECK(allocated_bytes(path) < (64u << 20));
    CHECK(std::vector<std::string>{"model.ninfer"} ==
          [&] { std::vector<std::string> n; for (auto& e : std::filesystem::directory_iterator(dir.path)) n.push_back(e.path().filename()); return n; }());

    std::unique_ptr<Artifact> a = Artifact::open(path); // every V3 reader check passes
    CHECK(a->bindings().size() == n_bindings);
    CHECK(a->uses().size() == n_uses);
    CHECK(a->metadata_name() == model_id);
    CHECK(a->payload_bytes() == b.file_bytes - b.payload_start);
    uint64_t entry_start = a->file_bytes() - a->payload_bytes();
    CHECK(entry_start % 4096 == 0);
    CHECK(read_at(path, entry_start + b.offsets["text/token_embedding"], 16) == "EMBEDDING-MARKER");
    CHECK(a->resource("text", "chat_template.jinja")->text().substr(0, 14) == "{% template %}");
    CHECK(read_at(path, a->file_bytes() - 4, 4) == "TAIL");
    CHECK(a->has_binding("text/layers/3/attention/key"));
    CHECK(a->has_binding("mtp/layers/0/input_norm"));
    CHECK(a->has_binding("vision/layers/26/norm2_bias"));
    // Payload checksums computed during the copy: the marked embedding (marker, then a hole of
    // zeros) and the chat template, against CRCs computed here independently.
    auto stored = [&](const std::string& id) {
        const std::string metadata = a->metadata_json(), key = "\"" + id + "\":\"";
        const size_t at = metadata.find(key, metadata.find("\"payload_crc32c\""));
        REQUIRE(at != std::string::npos);
        return uint32_t(std::stoul(metadata.substr(at + key.size(), 8), nullptr, 16));
    };
    const StoredTensor& embedding = *a->binding("text/token_embedding").pieces.at(0).tensor;
    CHECK(stored("text/token_embedding") ==
          crc32c_extend_zeros(crc32c_extend(0, "EMBEDDING-MARKER", 16), embedding.bytes - 16));
    const ArtifactResource& chat_template = *a->resource("text", "chat_template.jinja");
    CHECK(stored("frontend/chat_template.jinja") == crc32c_extend(0, chat_template.data, chat_template.bytes));
}

} // namespace

TEST_CASE("the inventories have the published object and format counts", "[upgrade]") {
    auto count = [](const std::string& model) {
        std::map<std::string, int> c;
        for (const LegacyObject& o : legacy_inventory(model)) ++c[o.is_tensor ? legacy_format(o.format) : "resource"];
        return c;
    };
    CHECK(count("qwen3.6-27b") == std::map<std::string, int>{{"resource", 6}, {"BF16", 582}, {"FP32", 96}, {"I32", 1},
                                                              {"Q4G64_F16S", 183}, {"Q5G64_F16S", 246}, {"Q6G64_F16S", 3},
                                                              {"W8G32_F16S", 7}});
    CHECK(count("qwen3.6-35b-a3b") == std::map<std::string, int>{{"resource", 6}, {"BF16", 487}, {"FP32", 60}, {"I32", 1},
                                                                  {"Q4G64_F16S", 95}, {"Q5G64_F16S", 91}, {"Q6G64_F16S", 5},
                                                                  {"W8G32_F16S", 195}});
    CHECK_THROWS_WITH(legacy_inventory("llama"), Catch::Contains("no published"));
}

TEST_CASE("a full 27B v1 file upgrades in place to a V3 file the reader accepts", "[upgrade]") {
    upgrade_and_check("qwen3.6-27b", 1, 17'495'365'888ull, 1422, 785);
}

TEST_CASE("a full 35B-A3B v2 file upgrades in place to a V3 file the reader accepts", "[upgrade]") {
    upgrade_and_check("qwen3.6-35b-a3b", 2, 22'783'246'080ull, 32713, 32184);
}

TEST_CASE("a full 35B-A3B v1 file has the published size and upgrades to a new path", "[upgrade]") {
    TempDir dir;
    std::string src = dir.path + "/a.ninfer", dst = dir.path + "/b.ninfer";
    Built b = build_legacy(src, "qwen3.6-35b-a3b", 1);
    CHECK(b.file_bytes == 22'783'246'080ull);
    ArtifactUpgradeResult r = artifact_upgrade(src, dst);
    CHECK(r.destination == dst);
    CHECK(read_at(src, 0, 8) == std::string("NINFER\0\1", 8)); // the source is untouched
    CHECK(Artifact::open(dst)->uses().size() == 32184);
    CHECK_THROWS_WITH(artifact_upgrade(src, dst), Catch::Contains("exists"));
    CHECK_THROWS_WITH(artifact_upgrade(dst, ""), Catch::Contains("already a V3"));
}

TEST_CASE("a set over the file size limit gets part files the reader accepts", "[upgrade]") {
    TempDir dir;
    std::string src = dir.path + "/m.ninfer";
    build_legacy(src, "qwen3.6-27b", 2);
    ArtifactUpgradeOptions opt;
    opt.file_size_limit = 8'000'000'000ull;
    ArtifactUpgradeResult r = artifact_upgrade(src, "", opt);
    CHECK(r.n_files == 3);
    CHECK(std::filesystem::exists(src + ".part-0001"));
    CHECK(std::filesystem::exists(src + ".part-0002"));
    CHECK(Artifact::open(src)->file_count() == 3);
}

TEST_CASE("inputs that are not the published inventory are refused and left as they were", "[upgrade]") {
    TempDir dir;
    std::string path = dir.path + "/x.ninfer";
    std::vector<LegacyObject> objects = legacy_inventory("qwen3.6-27b");
    objects[100].name += "_renamed";
    build_legacy(path, "qwen3.6-27b", 1, objects);
    CHECK_THROWS_WITH(artifact_upgrade(path, ""), Catch::Contains("differs from the published inventory"));
    objects = legacy_inventory("qwen3.6-27b");
    objects.pop_back();
    build_legacy(path, "qwen3.6-27b", 1, objects);
    CHECK_THROWS_WITH(artifact_upgrade(path, ""), Catch::Contains("1123 objects"));
    build_legacy(path, "qwen3.6-9b", 1, legacy_inventory("qwen3.6-27b"));
    CHECK_THROWS_WITH(artifact_upgrade(path, ""), Catch::Contains("no published groupwise-int inventory"));
    write_at(path, 0, "NOTNINF!");
    CHECK_THROWS_WITH(artifact_upgrade(path, ""), Catch::Contains("bad magic"));
    CHECK(std::filesystem::directory_iterator(dir.path)->path().filename() == "x.ninfer");
}

TEST_CASE("kill -9 during an in-place upgrade leaves the v1 file intact", "[upgrade]") {
    TempDir dir;
    std::string path = dir.path + "/k.ninfer";
    Built b = build_legacy(path, "qwen3.6-35b-a3b", 1);
    std::string head = read_at(path, 0, 4096);
    for (int delay_ms : {5, 30, 120}) {
        pid_t pid = ::fork();
        if (pid == 0) {
            try {
                artifact_upgrade(path, "");
            } catch (...) {
            }
            _exit(0);
        }
        ::usleep(useconds_t(delay_ms * 1000));
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        std::string now = read_at(path, 0, 8);
        if (now == std::string("NINFER\0\3", 8)) break; // finished before the kill: a complete V3 file
        CHECK(read_at(path, 0, 4096) == head);
        CHECK(std::filesystem::file_size(path) == b.file_bytes);
    }
}
