// ninfer - bench_decode: the CUDA backend's decode/prefill bench on synthetic weights of a real
// shape (core/cuda/decode_bench.h), until `ninferctl bench` carries it.
// Usage: bench_decode [--synthetic SHAPE] [--recipe bf16|fp8|q4] [--batch 1,2,4,8]
//                     [--depth 512,8192] [--steps N] [--prompt-len N]
#include "core/cuda/decode_bench.h"

#include <cstdio>
#include <exception>
#include <sstream>
#include <string>

namespace {
template <class T> std::vector<T> list(const std::string& s) {
    std::vector<T> out;
    std::stringstream in(s);
    std::string item;
    while (std::getline(in, item, ',')) out.push_back(T(std::stoul(item)));
    return out;
}
} // namespace

int main(int argc, char** argv) {
    ninfer::core::DecodeBenchRequest r;
    try {
        for (int i = 1; i + 1 < argc; i += 2) {
            const std::string a = argv[i], v = argv[i + 1];
            if (a == "--synthetic") r.shape = v;
            else if (a == "--recipe") r.recipe = v;
            else if (a == "--batch") r.batches = list<int>(v);
            else if (a == "--depth") r.depths = list<uint32_t>(v);
            else if (a == "--steps") r.steps = std::stoi(v);
            else if (a == "--prompt-len") r.prefill_len = uint32_t(std::stoul(v));
            else {
                std::fprintf(stderr, "bench_decode: unknown option %s\n", a.c_str());
                return 2;
            }
        }
        const auto rep = ninfer::core::run_decode_bench(r);
        std::printf("bench_decode --synthetic %s --recipe %s\n%s", r.shape.c_str(), r.recipe.c_str(), rep.text().c_str());
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_decode: %s\n", e.what());
        return 1;
    }
}
