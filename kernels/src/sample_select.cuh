// ninfer::kernels - the sampler's order-statistic search: radix descent over 52-bit (value, id) keys.
//
// Every question the sampler asks is "which candidate, in (value desc, id asc) order, is the
// first where a running count or mass crosses a target": the k-th for top_k and top logprobs,
// the top_p cut, the draw. A Descent answers it without sorting the row: each pass builds a
// 2048-bucket histogram (count and f64 mass) of the next 11 key bits among candidates whose higher
// bits match the chosen prefix, a decide step picks the bucket where the target is crossed, and
// once that bucket (or, for top logprobs, everything from it up) holds <= kGatherCap candidates
// they are gathered, sorted in shared memory and scanned in order, as the CPU does.
#pragma once

#include "ninfer/kernels/sample.h"

#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

namespace ninfer::kernels::detail {

constexpr int kKeyBits = 52;
constexpr int kIdBits = 20;
constexpr uint64_t kIdMask = (1ull << kIdBits) - 1;
constexpr int kDigitBits = 11;
constexpr int kBuckets = 1 << kDigitBits;
constexpr int kGatherCap = 2048;
constexpr int kDecideThreads = 1024; // two buckets per thread

enum DescentMode : int { kIdle = 0, kDescend = 1, kGather = 2, kDone = 3 };
enum DescentKind : int { kCount = 0, kMassGe = 1, kMassGt = 2 };
enum DescentFirst : int { kFirstNone = 0, kFirstTopK = 1, kFirstTopP = 2, kFirstDraw = 3 };

// One search over one row. lives in the workspace; the launch sequence moves it through the modes.
struct Descent {
    int mode;
    int kind;
    int source;       // 0: z with the head filter (draws), 1: raw logits, every id (top logprobs)
    int first;        // what the first decide derives from the totals (DescentFirst)
    int known_bits;   // top bits of the key fixed so far
    int base_count;   // candidates above the current range
    int gather_above; // gather the range and every candidate above it (top logprobs)
    int no_cross;     // mass target not reached (rounding): resolve to the last candidate
    int n_list;       // gather list fill
    int rank;         // kCount: 0-based rank inside the current range
    uint64_t lo_bound; // candidates need key >= lo_bound
    uint64_t prefix;   // the fixed top bits
    double target;     // mass kinds: absolute running-mass target (e units)
    double base_mass;  // mass above the current range
    uint64_t result;   // key of the answer (0 when the first decide found no cut)
};

// The row-wide values every kernel after the statistics needs.
struct RowState {
    double lse;       // log-sum-exp of the raw logits
    double top;       // max z
    double mass;      // S: mass of the top_k candidates
    float head_thr;   // candidates have z >= head_thr
    int argmax;       // of z (ties to the lower id)
    int draw;         // 1 when this row draws (temperature > 0, finite top, plan.draws)
    uint64_t key_top; // key of the argmax candidate
    uint64_t key_topk;
    uint64_t key_topp;
};

// Ascending in value; -0 and +0 share a key (v + 0 maps -0 to +0), as on the CPU.
__device__ __forceinline__ uint32_t value_key(float v) {
    const uint32_t b = __float_as_uint(v + 0.f);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ uint64_t make_key(float v, int id) {
    return (uint64_t(value_key(v)) << kIdBits) | (kIdMask - uint64_t(id));
}
__device__ __forceinline__ int key_id(uint64_t k) { return int(kIdMask - (k & kIdMask)); }
__device__ __forceinline__ float key_value(uint64_t k) {
    const uint32_t a = uint32_t(k >> kIdBits);
    return __uint_as_float((a & 0x80000000u) ? (a & 0x7FFFFFFFu) : ~a);
}

__device__ __forceinline__ int digit_width(int known_bits) {
    return min(kDigitBits, kKeyBits - known_bits);
}

// The bucket of candidate (v, id) in the descent's next digit, or -1 when it is out of range;
// *e gets its mass exp(v - top) for the mass kinds.
__device__ __forceinline__ int descent_bucket(const Descent& d, const RowState& rs, float v, int id, double* e) {
    *e = 0.0;
    if (d.source == 0 && !(v >= rs.head_thr))
        return -1;
    const uint64_t k = make_key(v, id);
    if (k < d.lo_bound)
        return -1;
    const int kb = d.known_bits;
    if (kb > 0 && (k >> (kKeyBits - kb)) != d.prefix)
        return -1;
    const int w = digit_width(kb);
    if (d.kind != kCount)
        *e = exp(double(v) - rs.top);
    return int((k >> (kKeyBits - kb - w)) & uint64_t((1 << w) - 1));
}

__device__ __forceinline__ double warp_sum_f64(double v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Adds every lane's (bucket b >= 0, mass e) to a shared histogram; all 32 lanes must call it.
// Values crowd into few buckets of the top digit, and a shared f64 atomic is a compare-and-swap
// loop, so lanes that share a bucket add their sum once (one leader per group).
__device__ __forceinline__ void warp_hist_add(int b, double e, bool with_mass, unsigned* cnt, double* mass) {
    const int lane = threadIdx.x & 31;
    const unsigned peers = __match_any_sync(0xffffffffu, b);
    const bool solo = __popc(peers) == 1;
    if (b >= 0 && solo) {
        atomicAdd(&cnt[b], 1u);
        if (with_mass)
            atomicAdd(&mass[b], e);
    }
    unsigned todo = __ballot_sync(0xffffffffu, b >= 0 && !solo);
    while (todo) {
        const int src = __ffs(todo) - 1;
        const unsigned group = __shfl_sync(0xffffffffu, peers, src);
        const double sum = with_mass ? warp_sum_f64((group >> lane) & 1u ? e : 0.0) : 0.0;
        if (lane == src) {
            atomicAdd(&cnt[b], unsigned(__popc(group)));
            if (with_mass)
                atomicAdd(&mass[b], sum);
        }
        todo &= ~group;
    }
}

// Appends candidate (v, id) to the gather list if it is in the chosen range.
__device__ __forceinline__ void descent_gather(const Descent& d, const RowState& rs, float v, int id,
                                               int* n_list, uint64_t* list) {
    if (d.source == 0 && !(v >= rs.head_thr))
        return;
    const uint64_t k = make_key(v, id);
    const int below = kKeyBits - d.known_bits;
    const uint64_t lo = d.prefix << below;
    const uint64_t hi = d.gather_above ? ~0ull : (lo | ((1ull << below) - 1));
    if (k < d.lo_bound || k < lo || k > hi)
        return;
    const int slot = atomicAdd(n_list, 1);
    if (slot < kGatherCap)
        list[slot] = k;
}

__device__ __forceinline__ bool crossed(int kind, double cum_mass, int cum_count, const Descent& d,
                                        double target) {
    if (kind == kCount)
        return cum_count > d.rank;
    return kind == kMassGe ? cum_mass >= target : cum_mass > target;
}

// Exclusive scan over a block of kDecideThreads; *total gets the sum. scratch: 32 elements.
template <typename T> __device__ inline T block_exclusive_scan(T v, T* scratch, T* total) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    T inc = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const T n = __shfl_up_sync(0xffffffffu, inc, o);
        if (lane >= o)
            inc += n;
    }
    __syncthreads();
    if (lane == 31)
        scratch[warp] = inc;
    __syncthreads();
    if (warp == 0) {
        T s = scratch[lane];
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const T n = __shfl_up_sync(0xffffffffu, s, o);
            if (lane >= o)
                s += n;
        }
        scratch[lane] = s;
    }
    __syncthreads();
    *total = scratch[31];
    const T before = (warp > 0 ? scratch[warp - 1] : T(0)) + inc - v;
    __syncthreads(); // scratch is reused by the next scan
    return before;
}

// One decide step by a block of kDecideThreads over a histogram of the descent's next digit:
// picks the bucket where the target is crossed and narrows the descent to it. When zero is set
// the histogram is cleared for the next pass. `u` is the row's uniform (for kFirstDraw);
// top_p is the row's (for kFirstTopP). Every thread must call it.
__device__ inline void descent_decide(Descent* dp, RowState* rs, unsigned* cnt, double* mass, bool zero, double u,
                               float top_p) {
    __shared__ int s_count_scratch[32];
    __shared__ double s_mass_scratch[32];
    __shared__ int s_first, s_last, s_stop;
    __shared__ double s_target;
    const Descent d = *dp;
    const int w = digit_width(d.known_bits), nb = 1 << w;
    const int p0 = 2 * threadIdx.x, p1 = p0 + 1; // positions in descending bucket order
    const int b0 = nb - 1 - p0, b1 = nb - 1 - p1;
    const int c0 = p0 < nb ? int(cnt[b0]) : 0, c1 = p1 < nb ? int(cnt[b1]) : 0;
    const double m0 = p0 < nb ? mass[b0] : 0.0, m1 = p1 < nb ? mass[b1] : 0.0;
    if (zero) {
        if (p0 < nb) { cnt[b0] = 0; mass[b0] = 0.0; }
        if (p1 < nb) { cnt[b1] = 0; mass[b1] = 0.0; }
    }
    int total_count;
    double total_mass;
    const int cb = block_exclusive_scan(c0 + c1, s_count_scratch, &total_count);
    const double mb = block_exclusive_scan(m0 + m1, s_mass_scratch, &total_mass);
    if (threadIdx.x == 0) {
        s_first = INT_MAX;
        s_last = -1;
        s_stop = 0;
        s_target = d.target;
        if (d.known_bits == 0) {
            if (d.first == kFirstTopK && total_count <= d.rank + 1)
                s_stop = 1; // the head has no more than top_k candidates: no cut
            if (d.first == kFirstTopP) {
                rs->mass = total_mass;
                s_target = double(top_p) * total_mass;
                s_stop = top_p >= 1.f;
            }
            if (d.first == kFirstDraw)
                s_target = u * total_mass;
        }
    }
    __syncthreads();
    const double target = s_target;
    if (s_stop) {
        if (threadIdx.x == 0) {
            dp->mode = kDone;
            dp->result = 0;
        }
        return;
    }
    const double cum0 = d.base_mass + mb + m0, cum1 = cum0 + m1;
    if (c0 > 0 && crossed(d.kind, cum0, cb + c0, d, target))
        atomicMin(&s_first, p0);
    else if (c1 > 0 && crossed(d.kind, cum1, cb + c0 + c1, d, target))
        atomicMin(&s_first, p1);
    if (c1 > 0)
        atomicMax(&s_last, p1);
    else if (c0 > 0)
        atomicMax(&s_last, p0);
    __syncthreads();
    int chosen = s_first;
    const bool none = chosen == INT_MAX;
    if (none) {
        if (d.kind == kMassGe && d.known_bits == 0) { // top_p above the total mass: keep everything
            if (threadIdx.x == 0) {
                dp->mode = kDone;
                dp->result = 0;
            }
            return;
        }
        chosen = s_last; // rounding left the target unreached: the last candidate
    }
    if (chosen < 0) { // no candidate at all (cannot happen for a finite head): give up on the row
        if (threadIdx.x == 0) {
            dp->mode = kDone;
            dp->result = 0;
        }
        return;
    }
    if (chosen >> 1 != int(threadIdx.x))
        return;
    const bool second = chosen & 1;
    const int here = second ? c1 : c0;
    const int before = second ? cb + c0 : cb;
    const double before_mass = second ? mb + m0 : mb;
    Descent n = d;
    n.target = target;
    n.no_cross = d.no_cross | int(none);
    n.rank = d.rank - before;
    n.base_count = d.base_count + before;
    n.base_mass = d.base_mass + before_mass;
    n.prefix = (d.prefix << w) | uint64_t(second ? b1 : b0);
    n.known_bits = d.known_bits + w;
    const int gathered = d.gather_above ? n.base_count + here : here;
    if (gathered <= kGatherCap || n.known_bits == kKeyBits) {
        n.mode = kGather;
        n.n_list = 0;
    }
    *dp = n;
}

// Sorts keys[0, n) descending in shared memory (n <= kGatherCap); pads with 0. Block-wide.
__device__ inline void sort_keys_desc(uint64_t* keys, int n) {
    int n_pad = 1;
    while (n_pad < n)
        n_pad <<= 1;
    for (int i = n + threadIdx.x; i < n_pad; i += blockDim.x)
        keys[i] = 0;
    __syncthreads();
    for (int size = 2; size <= n_pad; size <<= 1) {
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            for (int i = threadIdx.x; i < n_pad; i += blockDim.x) {
                const int j = i ^ stride;
                if (j > i) {
                    const uint64_t a = keys[i], b = keys[j];
                    if ((a < b) == ((i & size) == 0)) {
                        keys[i] = b;
                        keys[j] = a;
                    }
                }
            }
            __syncthreads();
        }
    }
}

// Shared by sample.cu and sample_finish.cu.
constexpr int kWideThreads = 256;
constexpr int kItemsPerThread = 16;
constexpr int kChunk = kWideThreads * kItemsPerThread; // ids per block of the wide kernels
constexpr int kWidePasses = 2; // per phase; 22 key bits resolve almost every bucket to <= kGatherCap
constexpr int kPhasesDraw = 3;

struct Partial {
    float raw_max, raw_sum, z_max;
    int z_arg;
};

struct Workspace {
    float* z;
    Partial* partials;
    RowState* rows;
    Descent* descents; // [row][channel]: channel 0 draws, channel 1 top logprobs
    unsigned* hist_count;
    double* hist_mass;
    uint64_t* lists;
};

__host__ __device__ inline int n_chunks(int vocab) { return (vocab + kChunk - 1) / kChunk; }

// Carves the workspace (base may be null to measure it); returns the bytes used.
inline size_t carve(void* base, int n_rows, int vocab, Workspace* ws) {
    size_t at = 0;
    auto take = [&](size_t bytes) {
        void* p = base ? static_cast<char*>(base) + at : nullptr;
        at += (bytes + 255) & ~size_t(255);
        return p;
    };
    const size_t rows = size_t(n_rows), searches = rows * 2;
    ws->z = static_cast<float*>(take(rows * size_t(vocab) * 4));
    ws->partials = static_cast<Partial*>(take(rows * size_t(n_chunks(vocab)) * sizeof(Partial)));
    ws->rows = static_cast<RowState*>(take(rows * sizeof(RowState)));
    ws->descents = static_cast<Descent*>(take(searches * sizeof(Descent)));
    ws->hist_count = static_cast<unsigned*>(take(searches * kBuckets * 4));
    ws->hist_mass = static_cast<double*>(take(searches * kBuckets * 8));
    ws->lists = static_cast<uint64_t*>(take(searches * kGatherCap * 8));
    return at;
}

void launch_finish(const SampleArgs& a, const Workspace& ws, int phase, cudaStream_t stream);

} // namespace ninfer::kernels::detail
