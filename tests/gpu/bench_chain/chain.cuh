// ninfer GPU microbenchmark bench_chain - what the stages of both chains share: the stage's
// arithmetic (stage_body), its launch form (stage_kernel, StageLaunch), the f64 reference, timing
// (time_chain) and graph capture (capture_graph); output and CUDA checks come from ../bench_util.h.
//
// Contract: a stage s of G blocks reads the whole previous vector buf[s & 1] (kWidth f32) after
// its hand-off and writes rows i = b, b + G, ... of buf[(s + 1) & 1]:
//   out[i] = (s + 1) + 0.5 * dot(in - s, weights of stage s) * (1 + b / 1024) + c(s, i)
// (sync only: the sum of its weights instead of the dot). The integer part is the stage's tag:
// every thread checks that the 8 values it read carry tag s (their fraction in (-0.25, 0.75)) and
// sets *error otherwise, so a stale vector (tag s - 1), a half-written one (tag s + 1 mixed in) or
// garbage is caught at the stage that read it. reference_chain() computes the same in f64 for any
// list of per-stage block counts; the device result lands in buf[stages & 1]. The start vector
// carries tag 0 (values in [0, 0.5)).
#pragma once

#include "../bench_util.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace bench_chain {

constexpr int kWidth = 2048, kThreads = 256, kStages = 374, kRuns = 25; // kStages: ~ a 35B-A3B step
constexpr long long kTimeoutNs = 2000000000ll; // a poll gives up (and flags an error) after 2 s

// The stage constant c(s, i): small, different for every stage and row.
__host__ __device__ inline float stage_constant(int s, int i) {
    return float((s * 131 + i * 7) % 1024) * (1.0f / 4096.0f);
}
// Weight k of stage s (values in [-1/2048, 1/2048), exact in f32).
// (The hash is unsigned; the offset is taken in int, so the values are signed and small: a chain of
// these stays bounded, |out| < 1.)
__host__ __device__ inline float stage_weight(int s, int k) {
    const int h = int(((unsigned(s) * 2654435761u + unsigned(k) * 40503u) >> 12) % 2048u);
    return float(h - 1024) * (1.0f / (1 << 21));
}

__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
__device__ __forceinline__ unsigned load_acquire(const unsigned *p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void store_release(unsigned *p, unsigned v) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

struct Weights {
    float w[8];
};
__device__ __forceinline__ Weights load_weights(const float *weights, int s) {
    Weights r;
    const float4 *p =
        reinterpret_cast<const float4 *>(weights + size_t(s) * kWidth) + 2 * threadIdx.x;
    const float4 a = __ldg(p), b = __ldg(p + 1);
    r.w[0] = a.x, r.w[1] = a.y, r.w[2] = a.z, r.w[3] = a.w;
    r.w[4] = b.x, r.w[5] = b.y, r.w[6] = b.z, r.w[7] = b.w;
    return r;
}

// One stage of block b after its hand-off: the dot of the whole input with its weights (or, sync
// only, of its weights alone), then its rows of out.
template <bool kWork>
__device__ __forceinline__ void stage_body(const float *in, float *out, const Weights &wt, int s,
                                           int b, int blocks, float *warp_sums, int *error) {
    float acc = 0.f;
    if constexpr (kWork) {
        const float4 *p = reinterpret_cast<const float4 *>(in) + 2 * threadIdx.x;
        const float4 x0 = __ldcg(p), x1 = __ldcg(p + 1);
        const float x[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
        bool tagged = true; // false for NaN too
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            const float frac = x[k] - float(s); // exact: x is within a factor 2 of s (or s = 0)
            tagged = tagged && frac > -0.25f && frac < 0.75f;
            acc = fmaf(frac, wt.w[k], acc);
        }
        if (!tagged)
            atomicOr(error, 2); // (1: a persistent kernel's poll timed out)
    } else {
#pragma unroll
        for (int k = 0; k < 8; ++k)
            acc += wt.w[k];
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0)
        warp_sums[threadIdx.x >> 5] = acc;
    __syncthreads();
    float dot = 0.f;
#pragma unroll
    for (int w = 0; w < kThreads / 32; ++w)
        dot += warp_sums[w];
    // _rn: no contraction, so every kernel instance rounds alike (the variants compare bits).
    const float scaled = __fmul_rn(__fmul_rn(0.5f, dot), 1.0f + float(b) * (1.0f / 1024.0f));
    for (int i = b + blocks * int(threadIdx.x); i < kWidth; i += blocks * kThreads)
        out[i] = __fadd_rn(float(s + 1), __fadd_rn(scaled, stage_constant(s, i)));
}

// One stage as its own launch: buffers alternate by stage (stage s reads buf[s & 1]).
template <bool kWork>
__global__ void __launch_bounds__(kThreads)
    stage_kernel(float *buf, const float *weights, int s, int *error) {
    __shared__ float warp_sums[kThreads / 32];
    const Weights wt = load_weights(weights, s);
    asm volatile("griddepcontrol.launch_dependents;");
    asm volatile("griddepcontrol.wait;" ::: "memory");
    stage_body<kWork>(buf + (s & 1) * kWidth, buf + ((s + 1) & 1) * kWidth, wt, s, blockIdx.x,
                      gridDim.x, warp_sums, error);
}

// The chain on the host in f64: stage s run by blocks[s] blocks, each with its scale as the device
// applies it. Returns the final vector (the device's buf[blocks.size() & 1]).
inline std::vector<double> reference_chain(const std::vector<float> &start,
                                           const std::vector<int> &blocks, bool work) {
    std::vector<double> in(start.begin(), start.end()), out(kWidth);
    for (size_t s = 0; s < blocks.size(); ++s) {
        double dot = 0, wsum = 0;
        for (int k = 0; k < kWidth; ++k)
            dot += (in[size_t(k)] - double(s)) * stage_weight(int(s), k),
                wsum += stage_weight(int(s), k);
        for (int i = 0; i < kWidth; ++i) {
            const int b = i % blocks[s];
            out[size_t(i)] = double(s + 1) + 0.5 * (work ? dot : wsum) * (1.0 + b / 1024.0) +
                             stage_constant(int(s), i);
        }
        in.swap(out);
    }
    return in;
}

// Worst relative error of a device result against the reference (relative to max(1e-3, |ref|)).
// A value that is not finite on either side is an infinite error (a NaN would slip through max()).
inline double worst_rel_error(const std::vector<float> &got, const std::vector<double> &ref) {
    double worst = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        if (!std::isfinite(got[i]) || !std::isfinite(ref[i]))
            return INFINITY;
        worst = std::max(worst, std::fabs(got[i] - ref[i]) / std::max(1e-3, std::fabs(ref[i])));
    }
    return worst;
}

// The launch of one stage of a graph: blocks x kThreads on stream, with programmatic stream
// serialisation when pdl. The attribute lives in the object: keep it alive through the launch.
struct StageLaunch {
    cudaLaunchConfig_t cfg{};
    cudaLaunchAttribute attr{};
    StageLaunch(int blocks, cudaStream_t stream, bool pdl) {
        cfg.gridDim = dim3(unsigned(blocks));
        cfg.blockDim = dim3(kThreads);
        cfg.stream = stream;
        attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr.val.programmaticStreamSerializationAllowed = pdl ? 1 : 0;
        cfg.attrs = &attr;
        cfg.numAttrs = 1;
    }
};

// Times a chain: kRuns + 2 times, start is copied into buf[0] and enqueue(run) puts one whole
// chain on the stream between two events. Returns the last kRuns times in us (two warm-ups).
template <class Enqueue>
std::vector<double> time_chain(cudaStream_t stream, float *d_buf, const std::vector<float> &start,
                               Enqueue enqueue) {
    cudaEvent_t e0, e1;
    BENCH_CHECK_CUDA(cudaEventCreate(&e0));
    BENCH_CHECK_CUDA(cudaEventCreate(&e1));
    std::vector<double> us;
    for (int run = 0; run < kRuns + 2; ++run) {
        BENCH_CHECK_CUDA(cudaMemcpyAsync(d_buf, start.data(), kWidth * sizeof(float),
                                         cudaMemcpyHostToDevice, stream));
        BENCH_CHECK_CUDA(cudaEventRecord(e0, stream));
        enqueue(run);
        BENCH_CHECK_CUDA(cudaGetLastError());
        BENCH_CHECK_CUDA(cudaEventRecord(e1, stream));
        BENCH_CHECK_CUDA(cudaStreamSynchronize(stream));
        float ms = 0;
        BENCH_CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
        if (run >= 2)
            us.push_back(ms * 1e3);
    }
    BENCH_CHECK_CUDA(cudaEventDestroy(e0));
    BENCH_CHECK_CUDA(cudaEventDestroy(e1));
    return us;
}

// A graph of what enqueue() puts on stream (captured), instantiated; the caller destroys it.
template <class Enqueue> cudaGraphExec_t capture_graph(cudaStream_t stream, Enqueue enqueue) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    BENCH_CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    enqueue();
    BENCH_CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
    BENCH_CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    BENCH_CHECK_CUDA(cudaGraphDestroy(graph));
    return exec;
}

// The step-shape chains (step_shape.cu): the 35B-A3B batch-1 step's stage sequence as it is and as
// a fully folded design would have it. Returns false when a result is wrong.
bool run_step_shapes(bench::ResultLines &out, const float *d_weights,
                     const std::vector<float> &start);

} // namespace bench_chain
