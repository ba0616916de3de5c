// ninfer::kernels - GPU sampler: bias, penalties, temperature, greedy, top-k/top-p/min-p draws and top logprobs.
//
// Launch sequence (sample()): prep (wide: z, raw log-sum-exp and argmax partials) -> stats (one
// block per row: reductions, greedy results, head threshold, first searches) -> per phase
// {top_k and top logprobs; top_p; draw}: 2 x (wide histogram pass, decide) -> wide gather ->
// finish (one block per row: completes a search the wide passes left open, sorts the gathered
// bucket, scans it in order and sets up the next phase). No launch depends on host values.
#include "common.cuh"
#include "ninfer/kernels/sample.h"
#include "sample_select.cuh"

namespace ninfer::kernels {

namespace detail {

// core::sampling.cpp's head_threshold: the smallest float l with double(l) - top >= -40.
__device__ float head_threshold(double top) {
    constexpr double kHeadSpan = 40.0;
    float t = float(top - kHeadSpan);
    while (double(t) - top < -kHeadSpan)
        t = nextafterf(t, INFINITY);
    for (float below = nextafterf(t, -INFINITY); double(below) - top >= -kHeadSpan;
         below = nextafterf(t, -INFINITY))
        t = below;
    return t;
}

// The CPU's logit_bias -> penalties -> temperature, in f32 without contraction (the host build
// has no FMA, so a fused multiply-add here would round differently).
__device__ __forceinline__ float transform(float v, int id, const SampleRowParams& p, const int32_t* counts,
                                           const float* bias, float inv_t) {
    if (bias)
        v = __fadd_rn(v, bias[id]);
    if (counts) {
        const int n = counts[id] + (id == p.count_token);
        if (n > 0) {
            const float rep = p.repetition_penalty;
            if (rep != 1.f && rep > 0.f)
                v = v > 0.f ? __fdiv_rn(v, rep) : __fmul_rn(v, rep);
            v = __fsub_rn(v, __fadd_rn(p.presence_penalty, __fmul_rn(p.frequency_penalty, float(n))));
        }
    }
    return p.temperature > 0.f ? __fmul_rn(v, inv_t) : v;
}

__device__ __forceinline__ bool better(float v, int i, float best, int best_i) {
    return v > best || (v == best && i < best_i); // a NaN never wins
}

// Every lane ends with the warp's best (value, id) by `better` (a total order: any tree gives it).
__device__ __forceinline__ void warp_best(float& v, int& i) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, v, o);
        const int oi = __shfl_xor_sync(0xffffffffu, i, o);
        if (better(ov, oi, v, i)) { v = ov; i = oi; }
    }
}

__global__ void __launch_bounds__(kWideThreads) sample_prep_kernel(SampleArgs a, Workspace ws) {
    __shared__ float s_max[32], s_sum[32], s_zv[32];
    __shared__ int s_zi[32];
    const int row = blockIdx.y, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const SampleRowParams p = a.rows[row];
    const float* l = a.logits + int64_t(row) * a.stride;
    float* z = ws.z + int64_t(row) * a.vocab;
    const int32_t* counts =
        (p.flags & kSampleUseCounts) && a.counts ? a.counts + int64_t(p.lane) * a.vocab : nullptr;
    const float* bias = (p.flags & kSampleUseBias) && a.bias ? a.bias + int64_t(p.lane) * a.vocab : nullptr;
    const uint32_t* mask =
        (p.flags & kSampleUseMask) && a.mask ? a.mask + int64_t(p.lane) * a.mask_words : nullptr;
    const float inv_t = p.temperature > 0.f ? __fdiv_rn(1.f, p.temperature) : 1.f;
    const int base = blockIdx.x * kChunk;
    float raw[kItemsPerThread];
    float m = -INFINITY;
#pragma unroll
    for (int j = 0; j < kItemsPerThread; ++j) {
        const int i = base + tid + j * kWideThreads;
        raw[j] = i < a.vocab ? l[i] : -INFINITY;
        m = fmaxf(m, raw[j]);
    }
    float s = 0.f, zb = -INFINITY;
    int zi = INT_MAX;
#pragma unroll
    for (int j = 0; j < kItemsPerThread; ++j) {
        const int i = base + tid + j * kWideThreads;
        if (i >= a.vocab)
            continue;
        if (m > -INFINITY)
            s += expf(raw[j] - m);
        // A disallowed id is -inf before bias, penalties and temperature, which keep it -inf.
        const bool allowed = !mask || ((i >> 5) < a.mask_words && ((mask[i >> 5] >> (i & 31)) & 1u));
        const float v = allowed ? transform(raw[j], i, p, counts, bias, inv_t) : -INFINITY;
        z[i] = v;
        if (better(v, i, zb, zi)) { zb = v; zi = i; }
    }
    const float wm = warp_max(m);
    float wsum = m > -INFINITY ? s * expf(m - wm) : 0.f;
    wsum = warp_sum(wsum);
    warp_best(zb, zi);
    if (lane == 0) {
        s_max[warp] = wm;
        s_sum[warp] = wsum;
        s_zv[warp] = zb;
        s_zi[warp] = zi;
    }
    __syncthreads();
    if (tid == 0) {
        const int n_warps = kWideThreads / 32;
        Partial out{-INFINITY, 0.f, -INFINITY, INT_MAX};
        for (int w = 0; w < n_warps; ++w) {
            out.raw_max = fmaxf(out.raw_max, s_max[w]);
            if (better(s_zv[w], s_zi[w], out.z_max, out.z_arg)) { out.z_max = s_zv[w]; out.z_arg = s_zi[w]; }
        }
        for (int w = 0; w < n_warps; ++w)
            if (s_max[w] > -INFINITY)
                out.raw_sum += s_sum[w] * expf(s_max[w] - out.raw_max);
        ws.partials[row * gridDim.x + blockIdx.x] = out;
    }
}

__global__ void __launch_bounds__(1024) sample_stats_kernel(SampleArgs a, Workspace ws) {
    const int row = blockIdx.x, V = a.vocab;
    const int chunks = n_chunks(V);
    for (int b = threadIdx.x; b < 2 * kBuckets; b += blockDim.x) {
        ws.hist_count[size_t(row) * 2 * kBuckets + b] = 0;
        ws.hist_mass[size_t(row) * 2 * kBuckets + b] = 0.0;
    }
    if (threadIdx.x >= 32)
        return;
    // Warp 0 reduces the per-chunk partials: lane l takes chunks l, l + 32, ... in order, then a
    // fixed shuffle tree combines the lanes, so the result does not depend on timing. (One thread
    // walking all chunks with a double exp each took ~10 us of a greedy step.)
    const int lane = threadIdx.x;
    const SampleRowParams p = a.rows[row];
    const float* l = a.logits + int64_t(row) * a.stride;
    const float* z = ws.z + int64_t(row) * V;
    float m = -INFINITY, zb = -INFINITY;
    int zi = INT_MAX;
    for (int c = lane; c < chunks; c += 32) {
        const Partial q = ws.partials[row * chunks + c];
        m = fmaxf(m, q.raw_max);
        if (better(q.z_max, q.z_arg, zb, zi)) { zb = q.z_max; zi = q.z_arg; }
    }
    m = warp_max(m);
    warp_best(zb, zi);
    double sum = 0.0;
    for (int c = lane; c < chunks; c += 32) {
        const Partial q = ws.partials[row * chunks + c];
        if (q.raw_max > -INFINITY)
            sum += double(q.raw_sum) * exp(double(q.raw_max) - double(m));
    }
    sum = warp_sum_f64(sum);
    if (lane != 0)
        return;
    if (isnan(z[0]) || zi == INT_MAX) { // the CPU's argmax: a NaN first value is the answer
        zi = 0;
        zb = z[0];
    }
    RowState rs{};
    rs.lse = m > -INFINITY ? double(m) + log(sum) : double(m);
    rs.top = zb;
    rs.argmax = zi;
    rs.key_top = make_key(zb, zi);
    rs.draw = a.plan.draws && p.temperature > 0.f && isfinite(zb);
    if (rs.draw)
        rs.head_thr = head_threshold(rs.top);
    ws.rows[row] = rs;
    if (a.counts && p.count_token >= 0 && p.count_token < V)
        a.counts[int64_t(p.lane) * V + p.count_token] += 1;
    if (!rs.draw) {
        a.ids[row] = zi;
        if (a.logprobs)
            a.logprobs[row] = float(double(l[zi]) - rs.lse);
    }
    Descent draws{}, top{};
    if (rs.draw) {
        draws.mode = kDescend;
        draws.kind = kCount;
        draws.first = kFirstTopK;
        draws.rank = (p.top_k > 0 && p.top_k < V ? p.top_k : V) - 1;
    }
    if (a.plan.top && p.n_top_logprobs > 0) {
        top.mode = kDescend;
        top.kind = kCount;
        top.source = 1;
        top.gather_above = 1;
        top.rank = min(min(p.n_top_logprobs, kSampleMaxTopLogprobs), V) - 1;
    }
    ws.descents[row * 2] = draws;
    ws.descents[row * 2 + 1] = top;
}

__device__ __forceinline__ const float* search_source(const SampleArgs& a, const Workspace& ws, int row, int source) {
    return source == 0 ? ws.z + int64_t(row) * a.vocab : a.logits + int64_t(row) * a.stride;
}

__global__ void __launch_bounds__(kWideThreads) sample_pass_kernel(SampleArgs a, Workspace ws) {
    __shared__ unsigned cnt[kBuckets];
    __shared__ double mass[kBuckets];
    const int row = blockIdx.y, search = row * 2 + blockIdx.z;
    const Descent d = ws.descents[search];
    if (d.mode != kDescend)
        return;
    const RowState rs = ws.rows[row];
    for (int b = threadIdx.x; b < kBuckets; b += kWideThreads) {
        cnt[b] = 0;
        mass[b] = 0.0;
    }
    __syncthreads();
    const float* src = search_source(a, ws, row, d.source);
    const int base = blockIdx.x * kChunk;
#pragma unroll 4
    for (int j = 0; j < kItemsPerThread; ++j) { // uniform trip count: warp_hist_add needs every lane
        const int i = base + threadIdx.x + j * kWideThreads;
        double e = 0.0;
        const int b = i < a.vocab ? descent_bucket(d, rs, src[i], i, &e) : -1;
        warp_hist_add(b, e, d.kind != kCount, cnt, mass);
    }
    __syncthreads();
    unsigned* gc = ws.hist_count + size_t(search) * kBuckets;
    double* gm = ws.hist_mass + size_t(search) * kBuckets;
    for (int b = threadIdx.x; b < kBuckets; b += kWideThreads)
        if (cnt[b]) {
            atomicAdd(&gc[b], cnt[b]);
            if (d.kind != kCount)
                atomicAdd(&gm[b], mass[b]);
        }
}

__global__ void __launch_bounds__(kDecideThreads) sample_decide_kernel(SampleArgs a, Workspace ws) {
    const int row = blockIdx.x, search = row * 2 + blockIdx.y;
    Descent* dp = ws.descents + search;
    if (dp->mode != kDescend)
        return;
    const SampleRowParams p = a.rows[row];
    descent_decide(dp, ws.rows + row, ws.hist_count + size_t(search) * kBuckets,
                   ws.hist_mass + size_t(search) * kBuckets, true, sample_uniform(p.seed, p.step), p.top_p);
}

__global__ void __launch_bounds__(kWideThreads) sample_gather_kernel(SampleArgs a, Workspace ws) {
    const int row = blockIdx.y, search = row * 2 + blockIdx.z;
    Descent* dp = ws.descents + search;
    const Descent d = *dp;
    if (d.mode != kGather)
        return;
    const RowState rs = ws.rows[row];
    const float* src = search_source(a, ws, row, d.source);
    uint64_t* list = ws.lists + size_t(search) * kGatherCap;
    const int base = blockIdx.x * kChunk;
    for (int j = 0; j < kItemsPerThread; ++j) {
        const int i = base + threadIdx.x + j * kWideThreads;
        if (i < a.vocab)
            descent_gather(d, rs, src[i], i, &dp->n_list, list);
    }
}

} // namespace detail
} // namespace ninfer::kernels

namespace ninfer::kernels {

size_t sample_workspace_bytes(int n_rows, int vocab) {
    detail::Workspace ws;
    return detail::carve(nullptr, n_rows, vocab, &ws);
}

cudaError_t sample(const SampleArgs& a, cudaStream_t stream) {
    using namespace detail;
    if (!a.logits || !a.rows || !a.ids || !a.workspace || a.vocab < 1 || a.vocab > kSampleMaxVocab ||
        a.n_rows < 1 || a.n_rows > 65535 || a.stride < a.vocab || (a.plan.top && (!a.top_ids || !a.top_logprobs)))
        return cudaErrorInvalidValue;
    Workspace ws;
    carve(a.workspace, a.n_rows, a.vocab, &ws);
    const dim3 wide(unsigned(n_chunks(a.vocab)), unsigned(a.n_rows), 2), per_search(unsigned(a.n_rows), 2);
    sample_prep_kernel<<<dim3(wide.x, wide.y), kWideThreads, 0, stream>>>(a, ws);
    sample_stats_kernel<<<a.n_rows, 1024, 0, stream>>>(a, ws);
    const int phases = a.plan.draws ? kPhasesDraw : (a.plan.top ? 1 : 0);
    for (int phase = 0; phase < phases; ++phase) {
        for (int pass = 0; pass < kWidePasses; ++pass) {
            sample_pass_kernel<<<wide, kWideThreads, 0, stream>>>(a, ws);
            sample_decide_kernel<<<per_search, kDecideThreads, 0, stream>>>(a, ws);
        }
        sample_gather_kernel<<<wide, kWideThreads, 0, stream>>>(a, ws);
        launch_finish(a, ws, phase, stream);
    }
    return cudaGetLastError();
}

} // namespace ninfer::kernels
