// ninfer tests - slot file save/restore speed for a large synthetic lane (a benchmark, not an
// assert: it prints GiB/s for both I/O paths and checks only that the image comes back intact).
// Size: $NINFER_BENCH_SLOT_MIB (default 256) MiB of KV rows. The save includes fsync, rename and
// the directory fsync; the restore reads through the page cache (a file just written is cached).
#include "core/engine/slot_file.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <unistd.h>

using namespace ninfer::core;

TEST_CASE("slot save and restore speed of a large synthetic lane", "[slot_file_bench]") {
    const char* env = std::getenv("NINFER_BENCH_SLOT_MIB");
    uint64_t mib = env ? std::strtoull(env, nullptr, 10) : 256;
    const char* dir_env = std::getenv("NINFER_BENCH_DIR");
    std::string dir = std::string(dir_env ? dir_env : "/tmp") + "/ninfer-slot-bench-" + std::to_string(::getpid());
    std::filesystem::create_directories(dir);
    SlotIdentity id;
    id.model_id = "bench";
    id.kv_bytes_per_token = 64 * 1024; // a 27B-like full-attention K+V footprint per token (bf16)
    id.gdn_bytes = 150ull << 20;       // 48 GDN layers of fp32 recurrent state (27B: ~150 MiB)
    uint64_t n_tokens = std::max<uint64_t>(1, (mib << 20) / id.kv_bytes_per_token);
    id.max_context = uint32_t(n_tokens);
    LaneImage img;
    img.tokens.resize(n_tokens);
    for (uint64_t i = 0; i < n_tokens; ++i) img.tokens[i] = int32_t(i % 248000);
    std::span<uint8_t> kv = img.add_section(LaneSectionTag::Kv, n_tokens * id.kv_bytes_per_token);
    std::span<uint8_t> gdn = img.add_section(LaneSectionTag::Gdn, id.gdn_bytes);
    for (size_t i = 0; i < kv.size(); i += 4096) kv[i] = uint8_t(i >> 12);
    for (size_t i = 0; i < gdn.size(); i += 4096) gdn[i] = uint8_t(i >> 12);
    for (FileIoMode mode : {FileIoMode::Uring, FileIoMode::Plain}) {
        std::string path = slot_file_path(dir, std::string("bench-") + file_io_mode_name(mode));
        SlotFileStats w = slot_file_write(path, id, img, mode);
        SlotFileStats r;
        LaneImage back = slot_file_read(path, id, mode, &r);
        double gib = double(w.bytes) / double(1ull << 30);
        std::printf("slot file %-8s %.2f GiB: save %.2f GiB/s (%.0f ms, fsync included), restore %.2f GiB/s (%.0f ms)\n",
                    file_io_mode_name(mode), gib, gib / (w.elapsed_ms / 1000), w.elapsed_ms, gib / (r.elapsed_ms / 1000),
                    r.elapsed_ms);
        CHECK(back == img);
        std::filesystem::remove(path);
    }
    std::filesystem::remove_all(dir);
}
