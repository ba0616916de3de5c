// ninfer - bench_decode: `ninferctl bench` (ctl/cmd_bench.cpp) as a binary of the GPU test set,
// so tests/gpu/run.sh runs it next to test_gpu. Same arguments and output.
#include "ctl/command_list.h"

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
    try {
        return ninfer::ctl::cmd_bench(argc - 1, argv + 1);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_decode: %s\n", e.what());
        return 1;
    }
}
