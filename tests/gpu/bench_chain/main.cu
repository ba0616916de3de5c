// ninfer GPU microbenchmark - what one dependent stage of a decode step costs at the least, handed
// on by a PDL launch boundary in a CUDA graph or by flags inside one persistent kernel. It measures
// the hardware's hand-off, not our kernels: the numbers behind kernels/PERF_NOTES.md "Session 14".
//
// Usage: bench_chain [SUMMARY_FILE]   (RESULT lines on stdout, appended to SUMMARY_FILE if given)
//
// A chain is kStages stages (a 35B-A3B batch-1 step has ~374 launches). In every stage each of G
// blocks of 256 threads needs the whole previous vector (kWidth f32, as a GEMV needs all of x):
//   - before the hand-off it loads its 8 weights a thread of this stage (constant data; a PDL
//     kernel loads them before griddepcontrol.wait, the persistent kernel before it polls);
//   - after it, it reads the 8 KB vector from L2 (two 16-byte loads a thread), forms the dot with
//     its weights (fmaf chain, butterfly over the warp, warp sums in order), and writes its rows
//     i = b, b + G, ... (the formula, with its stage tag, in chain.cuh).
// "sync only" stages skip the vector (a block writes its rows from its own weights): the hand-off
// alone.
// Hand-offs:
//   graph+PDL   one launch a stage, captured in a graph, programmatic stream serialisation;
//   graph       the same without the PDL attribute (the kernels still call the PDL instructions,
//               which are then no-ops);
//   counter     one persistent launch; a block's thread 0 adds 1 to the stage's counter after a
//               fence (all threads' stores ordered by the barrier before it); thread 0 of every
//               block polls that counter with ld.acquire until it reaches G x (run + 1);
//   flags       one persistent launch; a block's thread 0 stores its stage number to its own flag
//               with st.release; warp 0 of every block polls all G flags (a lane per flag, at most
//               5 loads a lane) with ld.acquire until each has reached the stage.
// Checks (any failure: exit status 1): every value carries its stage's tag and each reader checks
// the tags of what it read (chain.cuh), so a broken hand-off is caught at the stage it misleads;
// before timing, a chain that skips a stage must raise that flag and a whole one must not. Every
// variant's final vector must equal the graph+PDL one bit for bit (the same arithmetic in the same
// order) and a host f64 reference to 1e-5 relative.
// Time: cudaEvent around one graph replay or one persistent launch, median of 25 runs, per stage.
// Then step_shape.cu: the same stage at the block counts of a 35B-A3B step's launches, with the
// step's data-dependent reads, as the step is and as a fully folded one would be.
#include "chain.cuh"

#include <cstring>

namespace {

using namespace bench_chain;

enum Handoff { kCounter, kFlags };

// Every stage in one launch (all blocks resident). counters: kStages words; flags: one per block.
// Both only grow across runs: stage s of run r is complete when its counter reaches
// gridDim.x * (r + 1), or when every flag reaches r * kStages + s + 1.
template <Handoff H, bool kWork>
__global__ void __launch_bounds__(kThreads)
    persistent_kernel(float *buf, const float *weights, unsigned *counters, unsigned *flags,
                      int run, int *error) {
    __shared__ float warp_sums[kThreads / 32];
    __shared__ int failed;
    const int b = blockIdx.x, blocks = gridDim.x;
    if (threadIdx.x == 0)
        failed = 0;
    const unsigned long long t0 = global_ns();
    for (int s = 0; s < kStages; ++s) {
        const Weights wt = load_weights(weights, s); // before the wait, as a PDL kernel does
        if (s > 0) {
            if constexpr (H == kCounter) {
                if (threadIdx.x == 0) {
                    const unsigned want = unsigned(blocks) * unsigned(run + 1);
                    for (int spin = 0; load_acquire(counters + s - 1) < want; ++spin)
                        if ((spin & 1023) == 1023 && global_ns() - t0 > kTimeoutNs) {
                            failed = 1;
                            break;
                        }
                }
            } else if (threadIdx.x < 32) {
                const unsigned want = unsigned(run * kStages + s); // stage s - 1 done
                for (int spin = 0;; ++spin) {
                    bool ready = true;
                    for (int f = threadIdx.x; f < blocks; f += 32)
                        ready = ready && load_acquire(flags + f) >= want;
                    if (__all_sync(0xffffffffu, ready))
                        break;
                    if ((spin & 1023) == 1023 && global_ns() - t0 > kTimeoutNs) {
                        failed = 1;
                        break;
                    }
                }
            }
            __syncthreads();
            if (failed) {
                if (threadIdx.x == 0)
                    atomicOr(error, 1);
                return;
            }
        }
        stage_body<kWork>(buf + (s & 1) * kWidth, buf + ((s + 1) & 1) * kWidth, wt, s, b, blocks,
                          warp_sums, error);
        __syncthreads(); // every thread's rows stored (and warp_sums free again)
        if (threadIdx.x == 0) {
            if constexpr (H == kCounter) {
                __threadfence();
                atomicAdd(counters + s, 1u);
            } else {
                store_release(flags + b, unsigned(run * kStages + s + 1));
            }
        }
    }
}

// The persistent kernels by [kWork][handoff], for the residency guard and the launch.
using PersistentKernel = void (*)(float *, const float *, unsigned *, unsigned *, int, int *);
constexpr PersistentKernel kPersistent[2][2] = {
    {persistent_kernel<kCounter, false>, persistent_kernel<kFlags, false>},
    {persistent_kernel<kCounter, true>, persistent_kernel<kFlags, true>}};

} // namespace

int main(int argc, char **argv) {
    static_assert(kStages % 2 == 0, "the result lands in buf[0]");
    bench::ResultLines out;
    if (!out.open(argc, argv, "bench_chain"))
        return 1;
    int sms = 0;
    BENCH_CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    std::vector<float> weights(size_t(kStages) * kWidth), start(kWidth);
    for (int s = 0; s < kStages; ++s)
        for (int k = 0; k < kWidth; ++k)
            weights[size_t(s) * kWidth + size_t(k)] = stage_weight(s, k);
    for (int k = 0; k < kWidth; ++k)
        start[size_t(k)] = float(k % 97) / 194.0f; // tag 0: values in [0, 0.5)
    float *d_buf, *d_weights;
    unsigned *d_counters, *d_flags;
    int *d_error;
    BENCH_CHECK_CUDA(cudaMalloc(&d_buf, 2 * kWidth * sizeof(float)));
    BENCH_CHECK_CUDA(cudaMalloc(&d_weights, weights.size() * sizeof(float)));
    BENCH_CHECK_CUDA(cudaMalloc(&d_counters, kStages * sizeof(unsigned)));
    BENCH_CHECK_CUDA(cudaMalloc(&d_flags, 4 * size_t(sms) * sizeof(unsigned)));
    BENCH_CHECK_CUDA(cudaMalloc(&d_error, sizeof(int)));
    BENCH_CHECK_CUDA(cudaMemcpy(d_weights, weights.data(), weights.size() * sizeof(float),
                                cudaMemcpyHostToDevice));
    cudaStream_t stream;
    BENCH_CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    bool ok = true;
    char line[320];

    // The tag check fires on a stale read, and only then: stages 0, 1, 2, 3 in order leave the
    // flag clear; 0, 1, 3 make stage 3 read stage 0's output (tag 1 where it wants 3).
    for (const bool skip : {false, true}) {
        BENCH_CHECK_CUDA(
            cudaMemcpy(d_buf, start.data(), kWidth * sizeof(float), cudaMemcpyHostToDevice));
        BENCH_CHECK_CUDA(cudaMemset(d_error, 0, sizeof(int)));
        for (int s = 0; s < 4; ++s)
            if (!(skip && s == 2))
                stage_kernel<true><<<sms, kThreads>>>(d_buf, d_weights, s, d_error);
        BENCH_CHECK_CUDA(cudaGetLastError());
        int error = 0;
        BENCH_CHECK_CUDA(cudaMemcpy(&error, d_error, sizeof(int), cudaMemcpyDeviceToHost));
        if (error != (skip ? 2 : 0)) {
            std::fprintf(stderr,
                         "bench_chain: the tag check gave %d on a chain %s a skipped stage\n",
                         error, skip ? "with" : "without");
            ok = false;
        }
    }

    int resident[2][2]; // blocks an SM of each kPersistent kernel
    for (int w = 0; w < 2; ++w)
        for (int h = 0; h < 2; ++h)
            BENCH_CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                &resident[w][h], kPersistent[w][h], kThreads, 0));
    for (const bool work : {true, false}) {
        for (const int blocks : {sms / 2, sms, 2 * sms}) {
            const std::vector<double> ref =
                reference_chain(start, std::vector<int>(kStages, blocks), work);
            std::vector<float> first_result;
            for (int variant = 0; variant < 4; ++variant) {
                static const char *names[] = {"graph+PDL", "graph", "counter", "flags"};
                if (variant >= 2 && blocks > resident[work][variant - 2] * sms)
                    continue; // a persistent launch needs every block resident
                cudaGraphExec_t exec = nullptr;
                if (variant < 2)
                    exec = capture_graph(stream, [&] {
                        for (int s = 0; s < kStages; ++s) {
                            const StageLaunch launch(blocks, stream, variant == 0);
                            BENCH_CHECK_CUDA(cudaLaunchKernelEx(
                                &launch.cfg, work ? stage_kernel<true> : stage_kernel<false>, d_buf,
                                static_cast<const float *>(d_weights), s, d_error));
                        }
                    });
                // On the chain's stream: it does not wait for the legacy default stream.
                BENCH_CHECK_CUDA(
                    cudaMemsetAsync(d_counters, 0, kStages * sizeof(unsigned), stream));
                BENCH_CHECK_CUDA(
                    cudaMemsetAsync(d_flags, 0, 4 * size_t(sms) * sizeof(unsigned), stream));
                BENCH_CHECK_CUDA(cudaMemsetAsync(d_error, 0, sizeof(int), stream));
                const std::vector<double> us = time_chain(stream, d_buf, start, [&](int run) {
                    if (variant < 2)
                        BENCH_CHECK_CUDA(cudaGraphLaunch(exec, stream));
                    else
                        kPersistent[work][variant - 2]<<<blocks, kThreads, 0, stream>>>(
                            d_buf, d_weights, d_counters, d_flags, run, d_error);
                });
                int error = 0;
                std::vector<float> result(kWidth);
                BENCH_CHECK_CUDA(cudaMemcpy(&error, d_error, sizeof(int), cudaMemcpyDeviceToHost));
                BENCH_CHECK_CUDA(cudaMemcpy(result.data(), d_buf, kWidth * sizeof(float),
                                            cudaMemcpyDeviceToHost));
                const double worst = worst_rel_error(result, ref);
                if (first_result.empty())
                    first_result = result;
                const bool same =
                    std::memcmp(first_result.data(), result.data(), kWidth * sizeof(float)) == 0;
                const bool good = error == 0 && same && worst < 1e-5;
                ok = ok && good;
                if (exec)
                    BENCH_CHECK_CUDA(cudaGraphExecDestroy(exec));
                const double step = bench::median(us);
                std::snprintf(line, sizeof line,
                              "RESULT bench_chain %s, %s, %d blocks: %.3f us a stage (%d stages "
                              "in %.1f us, median of %d)%s",
                              work ? "8 KB vector a stage" : "sync only", names[variant], blocks,
                              step / kStages, kStages, step, kRuns, good ? "" : " WRONG RESULT");
                out.result(line);
                if (!good)
                    std::fprintf(stderr,
                                 "bench_chain: %s %d blocks: error flag %d, bits equal to "
                                 "graph+PDL: %d, worst rel err vs f64 %.3g\n",
                                 names[variant], blocks, error, same, worst);
            }
        }
    }
    ok = run_step_shapes(out, d_weights, start) && ok;
    BENCH_CHECK_CUDA(cudaDeviceSynchronize());
    return ok ? 0 : 1;
}
