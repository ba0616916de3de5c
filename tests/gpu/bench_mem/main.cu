// ninfer GPU microbenchmark - what a burst of expert-sized reads costs on an idle GPU, by access
// pattern, from DRAM and from L2, and a read's latency with its TLB entry thrashed or warm. It
// measures the hardware, not our kernels: the numbers behind kernels/PERF_NOTES.md "Session 13"
// runs 3-5 and 14.
//
// Usage: bench_mem [SUMMARY_FILE]   (RESULT lines on stdout, appended to SUMMARY_FILE if given)
// Needs a GPU with 64 GB free (the reads land at random places of a 64 GB buffer, so each
// iteration's are cold in L2 and, for the TLB part, in the TLB).
//
// Burst: 256 blocks of 256 threads each read 32 KB (8 MB in all) with every load of a lane in
// flight at once; block b reads at region b / per, offset (b % per) * 32 KB; regions are 1 MB (per
// = 32, like 8 chosen experts' gate/up rows) at random 2-region-aligned places. Span = the last
// block's end - the first block's start (%globaltimer, ns), median of 30 launches.
// TLB: 132 blocks (one an SM) each read 4 KB of a random 2 MB page with one 16-byte load a thread;
// cycles from before the load to after a barrier that needs every lane's value, median over blocks
// and then over 40 launches. A "thrash" launch first touches 16,384 other random pages (one word
// each: TLB entries, but little L2).
#include "../bench_util.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

namespace {

constexpr long long kBuf = 64ll << 30, kPage = 2ll << 20, kBlockBytes = 32768;

__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Patterns of a block's 32 KB (rows of 1 KB, 8 warps):
//   kContiguous16: 16-byte loads, a warp load 512 contiguous bytes;
//   kRows8x32 / kRows8x32Hint: the MoE q4 code loads (lane r, q: bytes 8q of 32-byte group g of
//   rows r, r + 8, r + 16, r + 24; warp w groups 4w .. 4w + 3), without / with the .L2::128B hint;
//   kRows2x128: 8-byte loads, a warp load 2 rows x 128 bytes.
enum Pattern { kContiguous16, kRows8x32, kRows8x32Hint, kRows2x128 };

template <Pattern P>
__global__ void burst_kernel(const char *base, const long long *region, int per,
                             unsigned long long *stamps, unsigned *sink) {
    __shared__ unsigned lane_sums[256];
    const char *p = base + region[blockIdx.x / per] + (blockIdx.x % per) * kBlockBytes;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, r = lane >> 2, q = lane & 3;
    __syncthreads();
    const unsigned long long t0 = global_ns();
    unsigned x = 0;
    if constexpr (P == kContiguous16) {
        uint4 v[8];
#pragma unroll
        for (int i = 0; i < 8; ++i)
            asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                         : "=r"(v[i].x), "=r"(v[i].y), "=r"(v[i].z), "=r"(v[i].w)
                         : "l"(p + (i * 256 + threadIdx.x) * 16));
#pragma unroll
        for (int i = 0; i < 8; ++i)
            x ^= v[i].x ^ v[i].y ^ v[i].z ^ v[i].w;
    } else {
        uint2 v[16];
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            const char *a = P == kRows2x128
                                ? p + (2 * i + (lane >> 4)) * 1024 + warp * 128 + 8 * (lane & 15)
                                : p + (r + 8 * (i & 3)) * 1024 + (4 * warp + (i >> 2)) * 32 + 8 * q;
            if constexpr (P == kRows8x32Hint)
                asm volatile("ld.global.nc.L1::no_allocate.L2::128B.v2.u32 {%0,%1}, [%2];"
                             : "=r"(v[i].x), "=r"(v[i].y)
                             : "l"(a));
            else
                asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];"
                             : "=r"(v[i].x), "=r"(v[i].y)
                             : "l"(a));
        }
#pragma unroll
        for (int i = 0; i < 16; ++i)
            x ^= v[i].x ^ v[i].y;
    }
    lane_sums[threadIdx.x] = x;
    __syncthreads(); // every lane's loads have landed
    const unsigned long long t1 = global_ns();
    if (threadIdx.x == 0) {
        stamps[2 * blockIdx.x] = t0;
        stamps[2 * blockIdx.x + 1] = t1;
        if (lane_sums[0] == 0x9e3779b9u)
            *sink = lane_sums[1]; // keeps the loads
    }
}

// burst_kernel by Pattern (the enum's order).
using BurstKernel = void (*)(const char *, const long long *, int, unsigned long long *,
                             unsigned *);
constexpr BurstKernel kBurstKernels[] = {burst_kernel<kContiguous16>, burst_kernel<kRows8x32>,
                                         burst_kernel<kRows8x32Hint>, burst_kernel<kRows2x128>};

__global__ void tlb_read_kernel(const char *base, const long long *offset, long long *cycles,
                                unsigned *sink) {
    __shared__ unsigned lane_sums[256];
    const char *p = base + offset[blockIdx.x] + threadIdx.x * 16;
    __syncthreads();
    const long long c0 = clock64();
    unsigned a, b, c, d;
    asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(a), "=r"(b), "=r"(c), "=r"(d)
                 : "l"(p));
    lane_sums[threadIdx.x] = a ^ b ^ c ^ d;
    __syncthreads();
    const long long c1 = clock64();
    if (threadIdx.x == 0) {
        cycles[blockIdx.x] = c1 - c0;
        if (lane_sums[0] == 0x9e3779b9u)
            *sink = lane_sums[1];
    }
}

__global__ void touch_kernel(const char *base, const long long *offset, int n, unsigned *sink) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    unsigned v;
    asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(base + offset[i]));
    if (v == 0x9e3779b9u)
        *sink = v;
}

} // namespace

int main(int argc, char **argv) {
    bench::ResultLines out;
    if (!out.open(argc, argv, "bench_mem"))
        return 1;
    char *buf = nullptr;
    BENCH_CHECK_CUDA(cudaMalloc(&buf, kBuf));
    BENCH_CHECK_CUDA(cudaMemset(buf, 1, kBuf));
    long long *d_offsets, *d_cycles;
    unsigned long long *d_stamps;
    unsigned *d_sink;
    constexpr int kThrash = 16384, kSms = 132, kBlocks = 256;
    BENCH_CHECK_CUDA(cudaMalloc(&d_offsets, kThrash * sizeof(long long)));
    BENCH_CHECK_CUDA(cudaMalloc(&d_cycles, kSms * sizeof(long long)));
    BENCH_CHECK_CUDA(cudaMalloc(&d_stamps, 2 * kBlocks * sizeof(unsigned long long)));
    BENCH_CHECK_CUDA(cudaMalloc(&d_sink, sizeof(unsigned)));
    std::mt19937_64 rng(11);
    char line[256];

    // Bursts.
    struct Burst {
        const char *name;
        Pattern pattern;
        int per; // blocks a region
        bool l2; // read once before, so the timed launch hits L2
    };
    const Burst bursts[] = {
        {"8 regions, 16-byte loads, 512 contiguous bytes a warp load, DRAM", kContiguous16, 32,
         false},
        {"8 regions, MoE code pattern (8 rows x 32 bytes a warp load), DRAM", kRows8x32, 32, false},
        {"8 regions, MoE code pattern with .L2::128B, DRAM", kRows8x32Hint, 32, false},
        {"8 regions, 8-byte loads, 2 rows x 128 bytes a warp load, DRAM", kRows2x128, 32, false},
        {"one region, 16-byte loads, DRAM", kContiguous16, kBlocks, false},
        {"8 regions, 16-byte loads, L2 hits", kContiguous16, 32, true},
        {"8 regions, MoE code pattern, L2 hits", kRows8x32, 32, true},
        {"8 regions, 8-byte loads, 2 rows x 128 bytes a warp load, L2 hits", kRows2x128, 32, true},
    };
    std::vector<unsigned long long> stamps(2 * kBlocks);
    for (const Burst &b : bursts) {
        const long long region_bytes = b.per * kBlockBytes;
        const int regions = kBlocks / b.per;
        std::vector<double> spans;
        for (int it = 0; it < 30; ++it) {
            std::vector<long long> region(static_cast<size_t>(regions));
            for (long long &r : region)
                r = (long long)(rng() % uint64_t(kBuf / region_bytes - 1)) * region_bytes;
            BENCH_CHECK_CUDA(cudaMemcpy(d_offsets, region.data(), regions * sizeof(long long),
                                        cudaMemcpyHostToDevice));
            for (int pass = b.l2 ? 0 : 1; pass < 2; ++pass) {
                kBurstKernels[b.pattern]<<<kBlocks, 256>>>(buf, d_offsets, b.per, d_stamps, d_sink);
                BENCH_CHECK_CUDA(cudaGetLastError());
            }
            BENCH_CHECK_CUDA(cudaMemcpy(stamps.data(), d_stamps,
                                        stamps.size() * sizeof(unsigned long long),
                                        cudaMemcpyDeviceToHost));
            unsigned long long first = ~0ull, last = 0;
            for (int k = 0; k < kBlocks; ++k)
                first = std::min(first, stamps[2 * k]), last = std::max(last, stamps[2 * k + 1]);
            spans.push_back(double(last - first) * 1e-3);
        }
        const double us = bench::median(spans), mb = kBlocks * kBlockBytes / 1e6;
        std::snprintf(line, sizeof line, "RESULT bench_mem burst 8.4 MB, %s: %.2f us, %.2f TB/s",
                      b.name, us, mb / us); // MB/us = TB/s
        out.result(line);
    }

    // TLB: each launch reads fresh random pages; the thrash launch evicts TLB entries, not L2
    // lines.
    int clock_khz = 0;
    BENCH_CHECK_CUDA(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    auto random_offsets = [&](std::vector<long long> &v, long long in_page) {
        for (long long &o : v)
            o = (long long)(rng() % uint64_t(kBuf / kPage)) * kPage + in_page;
    };
    std::vector<long long> offsets(kSms), thrash(kThrash), cycles(kSms), warm(kSms);
    // "thrashed": after the 16,384-page touch (whether that empties the TLB is the question asked).
    const char *cases[] = {"DRAM, TLB thrashed", "L2 hit, TLB thrashed", "L2 hit, TLB warm",
                           "DRAM, TLB warm (page touched before)"};
    long long *d_read = d_offsets + kThrash - kSms; // the last kSms slots: the timed reads' offsets
    for (int c = 0; c < 4; ++c) {
        std::vector<double> us;
        for (int it = 0; it < 40; ++it) {
            random_offsets(offsets, 4096 * (1 + (long long)(rng() % 200)));
            random_offsets(thrash, 0);
            BENCH_CHECK_CUDA(cudaMemcpy(d_offsets, thrash.data(),
                                        (kThrash - kSms) * sizeof(long long),
                                        cudaMemcpyHostToDevice));
            BENCH_CHECK_CUDA(cudaMemcpy(d_read, offsets.data(), kSms * sizeof(long long),
                                        cudaMemcpyHostToDevice));
            touch_kernel<<<(kThrash - kSms + 255) / 256, 256>>>(buf, d_offsets, kThrash - kSms,
                                                                d_sink);
            if (c == 1 || c == 2)
                tlb_read_kernel<<<kSms, 256>>>(buf, d_read, d_cycles,
                                               d_sink); // into L2 and the TLB
            if (c == 1)
                touch_kernel<<<(kThrash - kSms + 255) / 256, 256>>>(buf, d_offsets, kThrash - kSms,
                                                                    d_sink);
            if (c == 3) { // one word 1 MB into each page: its TLB entry, not the timed lines
                for (int b = 0; b < kSms; ++b)
                    warm[size_t(b)] = offsets[size_t(b)] - offsets[size_t(b)] % kPage + (1 << 20);
                BENCH_CHECK_CUDA(cudaMemcpy(d_offsets, warm.data(), kSms * sizeof(long long),
                                            cudaMemcpyHostToDevice));
                touch_kernel<<<1, kSms>>>(buf, d_offsets, kSms, d_sink);
            }
            tlb_read_kernel<<<kSms, 256>>>(buf, d_read, d_cycles, d_sink);
            BENCH_CHECK_CUDA(cudaGetLastError());
            BENCH_CHECK_CUDA(cudaMemcpy(cycles.data(), d_cycles, kSms * sizeof(long long),
                                        cudaMemcpyDeviceToHost));
            std::vector<double> block_us;
            for (long long cy : cycles)
                block_us.push_back(double(cy) * 1e3 / clock_khz);
            us.push_back(bench::median(block_us));
        }
        std::snprintf(
            line, sizeof line,
            "RESULT bench_mem 4 KB read a block, %s: %.3f us (median block, median of 40)",
            cases[c], bench::median(us));
        out.result(line);
    }
    BENCH_CHECK_CUDA(cudaDeviceSynchronize());
    return 0;
}
