// ninfer::kernels - greedy and top-k/top-p/min-p sampling: radix select, bitonic sort, one draw.
#include "common.cuh"
#include "ninfer/kernels/sample.h"

namespace ninfer::kernels {

namespace detail {

constexpr int kSampleThreads = 1024;

__device__ __forceinline__ uint32_t order_key(float f) {
    const uint32_t b = __float_as_uint(f);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// Exclusive prefix sum over the block (1024 threads); returns the total via *total.
__device__ int block_exclusive_scan(int v, int* warp_sums, int* total) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int inc = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int n = __shfl_up_sync(0xffffffffu, inc, o);
        if (lane >= o) inc += n;
    }
    __syncthreads();
    if (lane == 31) warp_sums[warp] = inc;
    __syncthreads();
    if (warp == 0) {
        int s = warp_sums[lane];
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int n = __shfl_up_sync(0xffffffffu, s, o);
            if (lane >= o) s += n;
        }
        warp_sums[lane] = s; // inclusive
    }
    __syncthreads();
    *total = warp_sums[31];
    return (warp > 0 ? warp_sums[warp - 1] : 0) + inc - v;
}

__global__ void __launch_bounds__(kSampleThreads) sample_kernel(SampleArgs a) {
    __shared__ float red_v[32];
    __shared__ int red_i[32];
    __shared__ int hist[256];
    __shared__ int warp_sums[32];
    __shared__ float cand_v[kSampleMaxTopK];
    __shared__ int cand_i[kSampleMaxTopK];
    __shared__ uint32_t sel_prefix, sel_mask;
    __shared__ int sel_remaining;
    const int row = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const float* l = a.logits + int64_t(row) * a.stride;
    const SampleRowParams prm = a.rows[row];

    // Argmax (ties to the lower id) and log-sum-exp of the raw logits.
    float best = -INFINITY;
    int best_i = INT_MAX;
    for (int i = tid; i < a.vocab; i += kSampleThreads) {
        const float v = l[i];
        if (v > best || (v == best && i < best_i)) { best = v; best_i = i; }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, best, o);
        const int oi = __shfl_xor_sync(0xffffffffu, best_i, o);
        if (ov > best || (ov == best && oi < best_i)) { best = ov; best_i = oi; }
    }
    if (lane == 0) { red_v[warp] = best; red_i[warp] = best_i; }
    __syncthreads();
    best = red_v[0];
    best_i = red_i[0];
    for (int w = 1; w < 32; ++w)
        if (red_v[w] > best || (red_v[w] == best && red_i[w] < best_i)) { best = red_v[w]; best_i = red_i[w]; }
    float se = 0.f;
    for (int i = tid; i < a.vocab; i += kSampleThreads) se += expf(l[i] - best);
    __syncthreads();
    const float log_z = best + logf(block_sum(se, red_v));

    if (prm.temperature <= 0.f) {
        if (tid == 0) {
            a.ids[row] = best_i;
            if (a.logprobs) a.logprobs[row] = l[best_i] - log_z;
        }
        return;
    }

    const int k = min(a.vocab, (prm.top_k <= 0 || prm.top_k > kSampleMaxTopK) ? kSampleMaxTopK : prm.top_k);
    // Radix select: the k-th largest key, 8 bits at a time from the top.
    if (tid == 0) { sel_prefix = 0; sel_mask = 0; sel_remaining = k; }
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int b = tid; b < 256; b += kSampleThreads) hist[b] = 0;
        __syncthreads();
        const uint32_t prefix = sel_prefix, mask = sel_mask;
        for (int i = tid; i < a.vocab; i += kSampleThreads) {
            const uint32_t key = order_key(l[i]);
            if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 0xFF], 1);
        }
        __syncthreads();
        if (tid == 0) {
            int rem = sel_remaining, b = 255;
            for (; b > 0 && hist[b] < rem; --b) rem -= hist[b];
            sel_remaining = rem;
            sel_prefix = prefix | (uint32_t(b) << shift);
            sel_mask = mask | (0xFFu << shift);
        }
        __syncthreads();
    }
    const uint32_t thresh = sel_prefix;
    const int need_eq = sel_remaining;
    // Gather in id order: thread tid owns ids [lo, hi).
    const int per = (a.vocab + kSampleThreads - 1) / kSampleThreads;
    const int lo = min(a.vocab, tid * per), hi = min(a.vocab, lo + per);
    int n_gt = 0, n_eq = 0;
    for (int i = lo; i < hi; ++i) {
        const uint32_t key = order_key(l[i]);
        n_gt += key > thresh;
        n_eq += key == thresh;
    }
    int total_gt = 0, total_eq = 0;
    int pos_gt = block_exclusive_scan(n_gt, warp_sums, &total_gt);
    int pos_eq = block_exclusive_scan(n_eq, warp_sums, &total_eq);
    for (int i = lo; i < hi; ++i) {
        const uint32_t key = order_key(l[i]);
        if (key > thresh) {
            cand_v[pos_gt] = l[i];
            cand_i[pos_gt++] = i;
        } else if (key == thresh) {
            if (pos_eq < need_eq) {
                cand_v[total_gt + pos_eq] = l[i];
                cand_i[total_gt + pos_eq] = i;
            }
            ++pos_eq;
        }
    }
    // Bitonic sort of the k candidates by (value desc, id asc), padded to a power of two.
    int n_pad = 1;
    while (n_pad < k) n_pad <<= 1;
    for (int i = k + tid; i < n_pad; i += kSampleThreads) { cand_v[i] = -INFINITY; cand_i[i] = INT_MAX; }
    __syncthreads();
    for (int size = 2; size <= n_pad; size <<= 1) {
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            for (int i = tid; i < n_pad; i += kSampleThreads) {
                const int j = i ^ stride;
                if (j > i) {
                    const bool desc = (i & size) == 0;
                    const float vi = cand_v[i], vj = cand_v[j];
                    const int ii = cand_i[i], ij = cand_i[j];
                    const bool i_first = vi > vj || (vi == vj && ii < ij);
                    if (i_first != desc) {
                        cand_v[i] = vj; cand_v[j] = vi;
                        cand_i[i] = ij; cand_i[j] = ii;
                    }
                }
            }
            __syncthreads();
        }
    }
    if (tid == 0) {
        // Same arithmetic as core's CPU sampler: z = float(l * (1/T)), probabilities in f64.
        const float inv_t = 1.f / prm.temperature;
        const double z0 = double(cand_v[0] * inv_t);
        double kept_total = 0.0;
        for (int i = 0; i < k; ++i) kept_total += exp(double(cand_v[i] * inv_t) - z0);
        // top_p then min_p shrink the kept prefix (both keep at least the first token).
        int n_keep = k;
        if (prm.top_p < 1.f) {
            double run = 0.0;
            for (int i = 0; i < k; ++i) {
                run += exp(double(cand_v[i] * inv_t) - z0) / kept_total;
                if (run >= double(prm.top_p)) { n_keep = i + 1; break; }
            }
        }
        if (prm.min_p > 0.f) {
            int m = 1;
            while (m < n_keep && exp(double(cand_v[m] * inv_t) - z0) >= double(prm.min_p)) ++m;
            n_keep = m;
        }
        double mass = 0.0;
        for (int i = 0; i < n_keep; ++i) mass += exp(double(cand_v[i] * inv_t) - z0);
        const double target = sample_uniform(prm.seed, prm.step) * mass;
        int chosen = n_keep - 1;
        double run = 0.0;
        for (int i = 0; i < n_keep; ++i) {
            run += exp(double(cand_v[i] * inv_t) - z0);
            if (target < run) { chosen = i; break; }
        }
        a.ids[row] = cand_i[chosen];
        if (a.logprobs) a.logprobs[row] = cand_v[chosen] - log_z;
    }
}

} // namespace detail

cudaError_t sample(const SampleArgs& a, cudaStream_t stream) {
    if (!a.logits || !a.rows || !a.ids || a.vocab < 1 || a.n_rows < 1 || a.stride < a.vocab)
        return cudaErrorInvalidValue;
    detail::sample_kernel<<<a.n_rows, detail::kSampleThreads, 0, stream>>>(a);
    return cudaGetLastError();
}

} // namespace ninfer::kernels
