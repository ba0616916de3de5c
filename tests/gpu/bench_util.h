// ninfer GPU microbenchmarks - what the bench binaries (bench_gpu, bench_gemm, bench_mem,
// bench_chain) share: a fatal CUDA check, the RESULT lines' output, a median.
//
// Contract:
// - BENCH_CHECK_CUDA(call): when call does not return cudaSuccess, prints file:line, the call and
//   CUDA's error string to stderr and exits with status 1 (a bench has nothing to report then).
// - ResultLines: open(argc, argv, tool) takes argv[1], when given, as a summary file to append to
//   and returns false (after saying so on stderr) when it cannot be opened; result(line) prints the
//   line and a newline to stdout and appends both to the summary file; the file closes with the
//   object.
// - median(v): the element at index size / 2 after sorting (the upper median for an even count);
//   v must not be empty.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define BENCH_CHECK_CUDA(call)                                                                     \
    do {                                                                                           \
        const cudaError_t e_ = (call);                                                             \
        if (e_ != cudaSuccess) {                                                                   \
            std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call,                      \
                         cudaGetErrorString(e_));                                                  \
            std::exit(1);                                                                          \
        }                                                                                          \
    } while (0)

namespace bench {

class ResultLines {
  public:
    ResultLines() = default;
    ResultLines(const ResultLines &) = delete;
    ResultLines &operator=(const ResultLines &) = delete;
    ~ResultLines() {
        if (summary_)
            std::fclose(summary_);
    }
    bool open(int argc, char **argv, const char *tool) {
        if (argc < 2)
            return true;
        summary_ = std::fopen(argv[1], "a");
        if (!summary_)
            std::fprintf(stderr, "%s: cannot append to %s\n", tool, argv[1]);
        return summary_ != nullptr;
    }
    void result(const char *line) {
        std::printf("%s\n", line);
        if (summary_)
            std::fprintf(summary_, "%s\n", line);
    }

  private:
    FILE *summary_ = nullptr;
};

inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

} // namespace bench
