// ninfer::kernels - the sampler's finish step (one block per search) and the count/bias uploads.
#include "ninfer/kernels/sample.h"
#include "sample_select.cuh"

namespace ninfer::kernels {

namespace detail {

// The lowest key the CPU's min_p keeps: the smallest z with e(z) / S >= min_p * (1 / S)
// (prob[0] = exp(0) / S), found by bisection over the ordered float keys below the top; the
// predicate is monotone in z, so every candidate at or above that value passes.
__device__ uint64_t min_p_key(const RowState& rs, float min_p) {
    if (!(min_p > 0.f))
        return 0;
    const double floor = double(min_p) * (1.0 / rs.mass);
    auto keeps = [&](uint32_t vk) {
        return exp(double(key_value(uint64_t(vk) << kIdBits)) - rs.top) / rs.mass >= floor;
    };
    uint32_t lo = value_key(-INFINITY), hi = value_key(float(rs.top));
    if (!keeps(hi))
        return ~0ull; // min_p > 1: only the first candidate (the caller clamps to it)
    while (lo < hi) {
        const uint32_t mid = lo + (hi - lo) / 2;
        if (keeps(mid))
            hi = mid;
        else
            lo = mid + 1;
    }
    return uint64_t(lo) << kIdBits;
}

// Moves row `row`'s draw search to its next phase once the current one is resolved (thread 0).
__device__ void next_phase(const SampleArgs& a, RowState* rs, Descent* dp, int phase, int row,
                           const SampleRowParams& p) {
    Descent n{};
    n.mode = kDescend;
    if (phase == 0) {
        rs->key_topk = dp->result; // 0: the head has no more than top_k candidates
        n.kind = kMassGe;
        n.first = kFirstTopP;
        n.lo_bound = rs->key_topk;
        *dp = n;
    } else if (phase == 1) {
        rs->key_topp = dp->result; // 0: top_p keeps every candidate
        uint64_t keep = max(max(rs->key_topk, rs->key_topp), min_p_key(*rs, p.min_p));
        n.kind = kMassGt;
        n.first = kFirstDraw;
        n.lo_bound = min(keep, rs->key_top); // the first candidate always stays
        *dp = n;
    } else {
        const bool ok = dp->mode == kDone && dp->result != 0;
        const int id = ok ? key_id(dp->result) : rs->argmax;
        a.ids[row] = id;
        if (a.logprobs)
            a.logprobs[row] = float(double(a.logits[int64_t(row) * a.stride + id]) - rs->lse);
    }
}

__global__ void __launch_bounds__(kDecideThreads) sample_finish_kernel(SampleArgs a, Workspace ws, int phase) {
    __shared__ unsigned cnt[kBuckets];
    __shared__ double mass[kBuckets];
    __shared__ uint64_t keys[kGatherCap];
    __shared__ int s_mode;
    const int row = blockIdx.x, ch = blockIdx.y, search = row * 2 + ch, tid = threadIdx.x;
    Descent* dp = ws.descents + search;
    RowState* rsp = ws.rows + row;
    const SampleRowParams p = a.rows[row];
    const double u = sample_uniform(p.seed, p.step);
    uint64_t* list = ws.lists + size_t(search) * kGatherCap;
    const float* src = dp->source == 0 ? ws.z + int64_t(row) * a.vocab : a.logits + int64_t(row) * a.stride;
    // A search the wide passes left open (many equal values, or more than kWidePasses digits):
    // this block continues it over the whole row, one digit per loop.
    for (;;) {
        __syncthreads();
        if (tid == 0)
            s_mode = dp->mode;
        __syncthreads();
        if (s_mode != kDescend)
            break;
        for (int b = tid; b < kBuckets; b += blockDim.x) {
            cnt[b] = 0;
            mass[b] = 0.0;
        }
        __syncthreads();
        {
            const Descent d = *dp;
            const RowState rs = *rsp;
            for (int i0 = 0; i0 < a.vocab; i0 += blockDim.x) { // uniform trip count (warp_hist_add)
                const int i = i0 + tid;
                double e = 0.0;
                const int b = i < a.vocab ? descent_bucket(d, rs, src[i], i, &e) : -1;
                warp_hist_add(b, e, d.kind != kCount, cnt, mass);
            }
        }
        __syncthreads();
        descent_decide(dp, rsp, cnt, mass, false, u, p.top_p);
        __syncthreads();
        if (tid == 0)
            s_mode = dp->mode;
        __syncthreads();
        if (s_mode == kGather) {
            const Descent d = *dp;
            const RowState rs = *rsp;
            for (int i = tid; i < a.vocab; i += blockDim.x)
                descent_gather(d, rs, src[i], i, &dp->n_list, list);
        }
    }
    if (s_mode == kGather) {
        const Descent d = *dp;
        const int n = min(d.n_list, kGatherCap);
        for (int i = tid; i < n; i += blockDim.x)
            keys[i] = list[i];
        __syncthreads();
        sort_keys_desc(keys, n);
        if (tid == 0) {
            uint64_t result = 0;
            if (n > 0 && d.kind == kCount) {
                result = keys[min(d.gather_above ? d.base_count + d.rank : d.rank, n - 1)];
            } else if (n > 0) { // the CPU's running sum, in its order, from the mass above the bucket
                int chosen = n - 1;
                double cum = d.base_mass;
                for (int i = 0; i < n && !d.no_cross; ++i) {
                    cum += exp(double(key_value(keys[i])) - rsp->top);
                    if (crossed(d.kind, cum, 0, d, d.target)) {
                        chosen = i;
                        break;
                    }
                }
                result = keys[chosen];
            }
            dp->result = result;
            dp->mode = kDone;
            if (d.source == 1) { // top logprobs: the gathered list starts with them, in order
                const int n_top = min(min(p.n_top_logprobs, kSampleMaxTopLogprobs), min(n, a.vocab));
                const float* l = a.logits + int64_t(row) * a.stride;
                for (int j = 0; j < n_top; ++j) {
                    const int id = key_id(keys[j]);
                    a.top_ids[row * kSampleMaxTopLogprobs + j] = id;
                    a.top_logprobs[row * kSampleMaxTopLogprobs + j] = float(double(l[id]) - rsp->lse);
                }
            }
        }
    }
    __syncthreads();
    if (tid == 0 && ch == 0 && rsp->draw)
        next_phase(a, rsp, dp, phase, row, p);
}

__global__ void counts_add_kernel(int32_t* counts, const int32_t* ids, int n, int vocab) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        if (ids[i] >= 0 && ids[i] < vocab)
            atomicAdd(&counts[ids[i]], 1);
}

__global__ void bias_scatter_kernel(float* bias, const int32_t* ids, const float* values, int n, int vocab) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        if (ids[i] >= 0 && ids[i] < vocab)
            bias[ids[i]] = values[i];
}

void launch_finish(const SampleArgs& a, const Workspace& ws, int phase, cudaStream_t stream) {
    sample_finish_kernel<<<dim3(unsigned(a.n_rows), 2), kDecideThreads, 0, stream>>>(a, ws, phase);
}

} // namespace detail

cudaError_t sample_counts_add(int32_t* counts, const int32_t* ids, int n, int vocab, cudaStream_t stream) {
    if (n == 0)
        return cudaSuccess;
    if (!counts || !ids || n < 0 || vocab < 1)
        return cudaErrorInvalidValue;
    detail::counts_add_kernel<<<min((n + 255) / 256, 1024), 256, 0, stream>>>(counts, ids, n, vocab);
    return cudaGetLastError();
}

cudaError_t sample_bias_scatter(float* bias, const int32_t* ids, const float* values, int n, int vocab,
                                cudaStream_t stream) {
    if (n == 0)
        return cudaSuccess;
    if (!bias || !ids || !values || n < 0 || vocab < 1)
        return cudaErrorInvalidValue;
    detail::bias_scatter_kernel<<<min((n + 255) / 256, 1024), 256, 0, stream>>>(bias, ids, values, n, vocab);
    return cudaGetLastError();
}

} // namespace ninfer::kernels
