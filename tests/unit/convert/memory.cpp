// ninfer tests - the converter's peak memory stays bounded: a sharded ~0.36 GB checkpoint (written
// by scripts/make_sharded_checkpoint.py) converts in a child process whose peak RSS stays far
// below the checkpoint size.
#include "hf_fixture.h"

#include "core/convert/convert.h"

#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/wait.h>

using namespace ninfer;
using namespace ninfer::test;

TEST_CASE("converting a sharded checkpoint keeps peak RSS bounded", "[memory]") {
    const std::string src = temp_dir("sharded"), out = temp_dir("sharded.ninfer");
    const std::string cmd = std::string("python3 ") + NINFER_SOURCE_DIR +
                            "/scripts/make_sharded_checkpoint.py " + src +
                            " --hidden 512 --layers 4 --intermediate 2048 --shards 4 > /dev/null";
    REQUIRE(std::system(cmd.c_str()) == 0);
    uint64_t source_bytes = 0;
    for (const auto& e : fs::directory_iterator(src))
        if (e.path().extension() == ".safetensors")
            source_bytes += e.file_size();
    REQUIRE(source_bytes > 350'000'000);

    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        try {
            core::ConvertRequest r;
            r.src_dir = src;
            r.out_path = out;
            core::convert_checkpoint(r); // default recipe (fp8)
            _exit(0);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "%s\n", e.what());
            _exit(1);
        }
    }
    int status = 0;
    struct rusage usage {};
    REQUIRE(wait4(child, &status, 0, &usage) == child);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    const uint64_t peak_bytes = uint64_t(usage.ru_maxrss) * 1024;
    INFO("peak RSS " << peak_bytes << " bytes for " << source_bytes << " source bytes");
    // Largest object: a [151936,512] vocabulary matrix, 78 MB as fp8; a converter that kept the
    // source or the output resident would need more than the whole checkpoint.
    CHECK(peak_bytes < 256'000'000);
    auto a = core::Artifact::open(out);
    CHECK(a->binding("text/output_head").shape == std::vector<uint64_t>{151936, 512});
    fs::remove_all(src);
}
