// ninfer GPU microbenchmark bench_chain, part 2: the floor of a whole 35B-A3B batch-1 decode step's
// structure. Every stage is the trivial stage of chain.cuh (8 KB vector from L2, one dot, a row
// slice written) run by the block count of the launch it stands for, in a graph with PDL, and it
// reads the bytes that launch reads (q4_g64 weights at 0.5625 bytes a parameter, bf16 router and
// KV, f32 GDN state), where the step reads them:
//   - before griddepcontrol.wait, what is known a step ahead: every dense matrix (GDN in_proj
//     14.2 MB, attention q/gate/k/v 10.6 MB, out projections 4.7 MB, router + shared gate/up
//     2.2 MB, shared down 0.6 MB, LM head 286 MB), the GDN state (2.1 MB) and the KV (16.8 MB at
//     depth 8192); each from a region of its own, cold in L2 (a replay streams ~1.8 GB);
//   - after the wait, what routing decides: the routed gate/up (9.4 MB) from DRAM, the routed
//     down (4.7 MB) from the gate/up's region (L2 hits, as the gate/up pulls the down rows now).
// "present" is the sequence of the launches the step runs now (kernels/PERF_NOTES.md session 11
// run 4: 9 a GDN layer, 10 an attention layer, then the final norm, the LM head and the sampler);
// "folded" is the least a layer could have if every norm, the conv and the attention prep were
// folded into a neighbour at no cost (6 a GDN layer, 7 an attention layer). Each shape also runs
// with the routed reads only and with no reads ("hand-offs only"). Results are checked against the
// f64 reference. A second replay, with each stage's first wait return stamped (one atomicMin a
// block), gives each launch kind's mean gap: the trivial counterpart of probe_report.py's gaps.
#include "chain.cuh"

#include <string>

namespace bench_chain {
namespace {

struct ShapedStage {
    const char *name; // the launch it stands for
    int blocks;
    long long pre_bytes, pre_offset;   // read before the wait (0: none), where in the buffer
    long long post_bytes, post_offset; // read after the wait
};

// Bytes a launch reads (35B-A3B: H 2048, GDN 16 key / 32 value heads of 128, attention 16 q / 2 kv
// heads of 256, 256 experts of I 512, 8 chosen, shared I 512, vocabulary 248320).
constexpr long long kParam = 9; // q4_g64_fp16: 9 bytes per 16 parameters (codes, scale, offset)
constexpr long long q4(long long rows, long long cols) { return rows * cols * kParam / 16; }
constexpr long long kInProj = q4(12352, 2048), kQgkv = q4(9216, 2048), kOut = q4(2048, 4096);
constexpr long long kFirst = 256 * 2048 * 2 + q4(1024, 2048), kSharedDown = q4(2048, 512);
constexpr long long kGateUp = 8 * q4(1024, 2048), kDown = 8 * q4(2048, 512);
constexpr long long kState = 32ll * 128 * 128 * 4, kKv = 2ll * 2 * 256 * 8192 * 2;
constexpr long long kLmHead = q4(248320, 2048);

// A block's slice of a burst: 16-byte loads, all of a thread's in flight (unrolled by 8), folded
// into one word so they are not dropped.
__device__ __forceinline__ unsigned burst_read(const char *base, long long bytes) {
    const long long per = bytes / gridDim.x / 16; // 16-byte vectors a block
    const uint4 *p = reinterpret_cast<const uint4 *>(base) + per * blockIdx.x;
    unsigned x = 0;
#pragma unroll 8
    for (long long i = threadIdx.x; i < per; i += kThreads) {
        const uint4 v = __ldcs(p + i);
        x ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    return x;
}

__global__ void __launch_bounds__(kThreads)
    shaped_stage_kernel(float *buf, const float *weights, int s, const char *pre,
                        long long pre_bytes, const char *post, long long post_bytes,
                        unsigned long long *first_wait, int *error, unsigned *sink) {
    __shared__ float warp_sums[kThreads / 32];
    const Weights wt = load_weights(weights, s);
    unsigned x = 0;
    if (pre_bytes > 0)
        x = burst_read(pre, pre_bytes);
    asm volatile("griddepcontrol.launch_dependents;");
    asm volatile("griddepcontrol.wait;" ::: "memory");
    if (first_wait && threadIdx.x == 0) // when the stage's first block was released (ns)
        atomicMin(first_wait + s, global_ns());
    if (post_bytes > 0)
        x ^= burst_read(post, post_bytes);
    stage_body<true>(buf + (s & 1) * kWidth, buf + ((s + 1) & 1) * kWidth, wt, s, blockIdx.x,
                     gridDim.x, warp_sums, error);
    if (x == 0x9e3779b9u)
        *sink = x; // keeps the loads
}

// The 35B-A3B batch-1 step: 40 layers, every fourth attention, then the LM head (and, present
// only, the final norm and the sampler). Every read has its own place in one buffer.
std::vector<ShapedStage> step_shape(bool folded, long long &buffer_bytes) {
    std::vector<ShapedStage> st;
    long long at = 0;
    auto stage = [&](const char *name, int blocks, long long pre, long long post = 0) {
        st.push_back({name, blocks, pre, at, post, at + pre});
        at += pre + post;
    };
    for (int layer = 0; layer < 40; ++layer) {
        const bool attention = layer % 4 == 3;
        if (!folded)
            stage("norm", 1, 0); // input norm
        if (attention) {
            stage("attention q/gate/k/v", 288, kQgkv);
            if (!folded)
                stage("attention prep", 8, 0);    // RoPE, q/k norm, KV write
            stage("attention partial", 258, kKv); // over the KV pages
            stage("attention combine", 16, 0);
        } else {
            stage("GDN in_proj", 386, kInProj);
            if (!folded)
                stage("GDN conv", 32, 0);
            stage("GDN recurrence", 128, kState); // + gated norm
        }
        stage("out projection", 256, kOut);
        if (!folded)
            stage("norm", 1, 0); // post-mixer norm
        stage("MoE router + shared", 97, kFirst);
        stage("MoE gate/up", 256, 0, kGateUp);
        const long long gate_up_rows = st.back().post_offset;
        stage("MoE down", 128, kSharedDown); // the shared rows before the wait,
        st.back().post_bytes = kDown;        // the routed rows after it, from the gate/up's region
        st.back().post_offset = gate_up_rows;
    }
    if (!folded)
        stage("norm", 1, 0); // final norm
    stage("LM head", 3880, kLmHead);
    if (!folded)
        stage("sampler", 1, 0);
    buffer_bytes = at;
    return st;
}

// "RESULT ... gap a launch": per launch name, in order of first appearance, the mean of its stages'
// gaps (us) and their count; the last stage has no successor and is left out.
std::string gaps_line(const std::vector<ShapedStage> &stages,
                      const std::vector<unsigned long long> &first_wait, bool folded,
                      const char *what) {
    std::vector<std::string> names;
    std::vector<double> sum;
    std::vector<int> count;
    for (size_t i = 0; i + 1 < stages.size(); ++i) {
        const size_t k =
            size_t(std::find(names.begin(), names.end(), stages[i].name) - names.begin());
        if (k == names.size())
            names.push_back(stages[i].name), sum.push_back(0), count.push_back(0);
        sum[k] += double(first_wait[i + 1] - first_wait[i]) * 1e-3; // ns -> us
        ++count[k];
    }
    std::string line = std::string("RESULT bench_chain 35B-A3B b1 step shape, ") +
                       (folded ? "folded" : "present") + ", " + what + ", gap a launch (us):";
    char item[96];
    for (size_t k = 0; k < names.size(); ++k) {
        std::snprintf(item, sizeof item, "%s %s %.2f x%d", k ? ";" : "", names[k].c_str(),
                      sum[k] / count[k], count[k]);
        line += item;
    }
    return line;
}

} // namespace

bool run_step_shapes(bench::ResultLines &out, const float *d_weights,
                     const std::vector<float> &start) {
    bool ok = true;
    char line[320];
    float *d_buf;
    unsigned *d_sink;
    int *d_error;                     // stage_body's tag check (2)
    unsigned long long *d_first_wait; // a stage's first wait return (ns, %globaltimer)
    BENCH_CHECK_CUDA(cudaMalloc(&d_buf, 2 * kWidth * sizeof(float)));
    BENCH_CHECK_CUDA(cudaMalloc(&d_sink, sizeof(unsigned)));
    BENCH_CHECK_CUDA(cudaMalloc(&d_error, sizeof(int)));
    BENCH_CHECK_CUDA(cudaMalloc(&d_first_wait, kStages * sizeof(unsigned long long)));
    cudaStream_t stream;
    BENCH_CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (const bool folded : {false, true}) {
        long long bytes = 0, read = 0, routed = 0; // buffer size, bytes read a step, of them routed
        const std::vector<ShapedStage> stages = step_shape(folded, bytes);
        if (stages.size() > size_t(kStages)) { // the weights and stamps hold kStages stages
            std::fprintf(stderr, "bench_chain: a step shape of %zu stages\n", stages.size());
            std::exit(1);
        }
        for (const ShapedStage &s : stages)
            read += s.pre_bytes + s.post_bytes, routed += s.post_bytes;
        char *d_burst;
        BENCH_CHECK_CUDA(cudaMalloc(&d_burst, size_t(bytes)));
        BENCH_CHECK_CUDA(cudaMemsetAsync(d_burst, 1, size_t(bytes), stream));
        std::vector<int> blocks;
        for (const ShapedStage &s : stages)
            blocks.push_back(s.blocks);
        const std::vector<double> ref = reference_chain(start, blocks, true);
        for (const int reads : {2, 1, 0}) { // 2: all, 1: routed only, 0: none
            // The timed graph has no stamps (their atomics cost ~0.1 us a stage); a second one
            // with them gives each stage's gap: its first wait return to the next stage's.
            auto capture = [&](unsigned long long *stamps) {
                return capture_graph(stream, [&] {
                    for (size_t i = 0; i < stages.size(); ++i) {
                        const ShapedStage &s = stages[i];
                        const StageLaunch launch(s.blocks, stream, true);
                        BENCH_CHECK_CUDA(cudaLaunchKernelEx(
                            &launch.cfg, shaped_stage_kernel, d_buf, d_weights, int(i),
                            static_cast<const char *>(d_burst + s.pre_offset),
                            reads == 2 ? s.pre_bytes : 0ll,
                            static_cast<const char *>(d_burst + s.post_offset),
                            reads >= 1 ? s.post_bytes : 0ll, stamps, d_error, d_sink));
                    }
                });
            };
            BENCH_CHECK_CUDA(cudaMemsetAsync(d_error, 0, sizeof(int), stream));
            cudaGraphExec_t exec = capture(nullptr);
            const std::vector<double> us = time_chain(stream, d_buf, start, [&](int) {
                BENCH_CHECK_CUDA(cudaGraphLaunch(exec, stream));
            });
            BENCH_CHECK_CUDA(cudaGraphExecDestroy(exec));
            const size_t last = (stages.size() & 1) * kWidth; // where the chain's result lands
            std::vector<float> result(kWidth), stamped_result(kWidth);
            BENCH_CHECK_CUDA(cudaMemcpy(result.data(), d_buf + last, kWidth * sizeof(float),
                                        cudaMemcpyDeviceToHost));
            exec = capture(d_first_wait);
            BENCH_CHECK_CUDA(
                cudaMemsetAsync(d_first_wait, 0xFF, kStages * sizeof(unsigned long long), stream));
            BENCH_CHECK_CUDA(cudaMemcpyAsync(d_buf, start.data(), kWidth * sizeof(float),
                                             cudaMemcpyHostToDevice, stream));
            BENCH_CHECK_CUDA(cudaGraphLaunch(exec, stream));
            BENCH_CHECK_CUDA(cudaStreamSynchronize(stream));
            BENCH_CHECK_CUDA(cudaGraphExecDestroy(exec));
            std::vector<unsigned long long> first_wait(stages.size());
            BENCH_CHECK_CUDA(cudaMemcpy(first_wait.data(), d_first_wait,
                                        stages.size() * sizeof(unsigned long long),
                                        cudaMemcpyDeviceToHost));
            BENCH_CHECK_CUDA(cudaMemcpy(stamped_result.data(), d_buf + last, kWidth * sizeof(float),
                                        cudaMemcpyDeviceToHost));
            const double worst = worst_rel_error(result, ref);
            int error = 0;
            BENCH_CHECK_CUDA(cudaMemcpy(&error, d_error, sizeof(int), cudaMemcpyDeviceToHost));
            const bool good = error == 0 && worst < 1e-5 && stamped_result == result;
            ok = ok && good;
            char what[96] = "hand-offs only"; // GB: bytes read a step / 1e9
            if (reads == 2)
                std::snprintf(what, sizeof what, "all its reads (%.3f GB)", read / 1e9);
            if (reads == 1)
                std::snprintf(what, sizeof what, "routed reads only (%.3f GB)", routed / 1e9);
            std::snprintf(line, sizeof line,
                          "RESULT bench_chain 35B-A3B b1 step shape, %s (%zu stages), %s: %.1f us "
                          "(median of %d)%s",
                          folded ? "folded" : "present", stages.size(), what, bench::median(us),
                          kRuns, good ? "" : " WRONG RESULT");
            out.result(line);
            out.result(gaps_line(stages, first_wait, folded, what).c_str());
            if (!good)
                std::fprintf(stderr,
                             "bench_chain: step shape: error flags %d, worst rel err vs f64 %.3g, "
                             "the stamped replay's result equal: %d\n",
                             error, worst, int(stamped_result == result));
        }
        BENCH_CHECK_CUDA(cudaFree(d_burst));
    }
    BENCH_CHECK_CUDA(cudaStreamDestroy(stream));
    BENCH_CHECK_CUDA(cudaFree(d_buf));
    BENCH_CHECK_CUDA(cudaFree(d_sink));
    BENCH_CHECK_CUDA(cudaFree(d_error));
    BENCH_CHECK_CUDA(cudaFree(d_first_wait));
    return ok;
}

} // namespace bench_chain
