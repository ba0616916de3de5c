// ninfer::kernels - MoE decode: routing launch, grouped gate/up + SwiGLU, down + weighted combine.
#include "moe_decode_route.cuh"
#include "ninfer/kernels/moe_decode.h"

namespace ninfer::kernels {

namespace detail {

constexpr int kGateUpRowsPerWarp = 2; // intermediate rows i, i+1: gate and up rows = 4 row dots
constexpr int kExpertWarps = 8;
constexpr int kGateUpRowsPerBlock = kGateUpRowsPerWarp * kExpertWarps;
constexpr int kDownTile = 16; // output rows per block of the down launch

struct ExpertParams {
    MoeRows gate_up, shared_gate_up, down, shared_down;
    int64_t inter, shared_inter, hidden;
    int top_k;
    const int32_t* work;
    const int32_t* ids;
    const float* weights;
    const float* x;
    int64_t x_stride;
    float* act;
    int64_t act_stride;
    float* out;
    int64_t out_stride;
};

template <WeightFormat F>
__device__ __forceinline__ void gate_up_rows(const MoeRows& m, const int64_t (&rows)[4], const float* const (&xs)[8],
                                             int nt, float (&acc)[8][4]) {
    rows_dot<F, 4, kMoeDecodeMaxTokens>(m, rows, xs, nt, threadIdx.x & 31, 32, acc);
}

// grid (ceil(max(I, Is) / 16), entries), 256 threads: warp w of block (b, entry) computes
// intermediate rows i = 16b + 2w, i + 1 of the entry's expert for every token of the entry.
__global__ void __launch_bounds__(kExpertWarps * 32) moe_gate_up_kernel(ExpertParams p) {
    const int entry = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (entry >= p.work[0]) return;
    const int32_t* en = p.work + 1 + entry * kMoeEntryInts;
    const int expert = en[0], nt = en[1];
    const bool shared = expert < 0;
    const MoeRows& m = shared ? p.shared_gate_up : p.gate_up;
    const int64_t I = shared ? p.shared_inter : p.inter;
    const int64_t i = int64_t(blockIdx.x) * kGateUpRowsPerBlock + warp * kGateUpRowsPerWarp;
    if (i >= I) return; // I is a multiple of 16: a warp has both of its rows or none
    const int64_t base = shared ? 0 : int64_t(expert) * 2 * I;
    const int64_t rows[4] = {base + i, base + i + 1, base + I + i, base + I + i + 1};
    int32_t pair[kMoeDecodeMaxTokens];
    const float* xs[kMoeDecodeMaxTokens];
#pragma unroll
    for (int t = 0; t < kMoeDecodeMaxTokens; ++t) {
        pair[t] = en[2 + min(t, nt - 1)];
        xs[t] = p.x + int64_t(pair[t] / (p.top_k + 1)) * p.x_stride;
    }
    float acc[kMoeDecodeMaxTokens][4] = {};
    switch (m.format) {
    case WeightFormat::Bf16: gate_up_rows<WeightFormat::Bf16>(m, rows, xs, nt, acc); break;
    case WeightFormat::Fp8E4m3RowBf16: gate_up_rows<WeightFormat::Fp8E4m3RowBf16>(m, rows, xs, nt, acc); break;
    default: gate_up_rows<WeightFormat::Q4G64Fp16>(m, rows, xs, nt, acc); break;
    }
    float scale[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) scale[j] = fp8_row_scale(m, rows[j]);
#pragma unroll
    for (int t = 0; t < kMoeDecodeMaxTokens; ++t) {
        if (t >= nt) break;
        float v[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) v[j] = warp_sum(acc[t][j]) * scale[j];
        if (lane == 0) {
            float* a = p.act + int64_t(pair[t]) * p.act_stride + i;
            a[0] = silu(v[0]) * v[2];
            a[1] = silu(v[1]) * v[3];
        }
    }
}

template <WeightFormat F>
__device__ __forceinline__ void down_rows(const MoeRows& m, const int64_t (&rows)[4], const float* x, int64_t c0,
                                          int lpr, float (&acc)[1][4]) {
    const float* const xs[1] = {x};
    rows_dot<F, 4, 1>(m, rows, xs, 1, c0, lpr, acc);
}

// Lanes per row of the down launch: enough for the row's 16-byte chunks, 8 to 32.
__device__ __forceinline__ int down_lanes_per_row(const MoeRows& m) {
    return m.chunks >= 32 ? 32 : m.chunks >= 16 ? 16 : 8;
}

// grid (H / 16, n_tokens), 256 threads: block (b, t) computes out[t][16b .. 16b + 16). Work items
// (choice j, pass): lpr lanes per row, 4 rows per lane group, 32/lpr groups, so a pass covers
// 128/lpr rows and a choice lpr/8 passes; dots go to shared memory and are combined in j order.
__global__ void __launch_bounds__(kExpertWarps * 32) moe_down_kernel(ExpertParams p) {
    __shared__ float dots[kMoeMaxTopK + 1][kDownTile];
    const int t = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31, K = p.top_k;
    const int64_t h0 = int64_t(blockIdx.x) * kDownTile;
    const int pe = down_lanes_per_row(p.down) / 8, ps = down_lanes_per_row(p.shared_down) / 8;
    for (int item = warp; item < K * pe + ps; item += kExpertWarps) {
        const int j = item < K * pe ? item / pe : K, pass = item < K * pe ? item % pe : item - K * pe;
        const bool shared = j == K;
        const MoeRows& m = shared ? p.shared_down : p.down;
        const int lpr = down_lanes_per_row(m), group = lane / lpr;
        const int r_local = pass * (128 / lpr) + group * 4;
        const int64_t base = (shared ? 0 : int64_t(p.ids[t * K + j]) * p.hidden) + h0 + r_local;
        int64_t rows[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) rows[r] = base + r;
        const float* x = p.act + int64_t(t * (K + 1) + j) * p.act_stride;
        float acc[1][4] = {};
        switch (m.format) {
        case WeightFormat::Bf16: down_rows<WeightFormat::Bf16>(m, rows, x, lane % lpr, lpr, acc); break;
        case WeightFormat::Fp8E4m3RowBf16: down_rows<WeightFormat::Fp8E4m3RowBf16>(m, rows, x, lane % lpr, lpr, acc); break;
        default: down_rows<WeightFormat::Q4G64Fp16>(m, rows, x, lane % lpr, lpr, acc); break;
        }
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            for (int o = lpr / 2; o > 0; o >>= 1) acc[0][r] += __shfl_xor_sync(0xffffffffu, acc[0][r], o);
            if (lane % lpr == 0) dots[j][r_local + r] = acc[0][r] * fp8_row_scale(m, rows[r]);
        }
    }
    __syncthreads();
    if (threadIdx.x < kDownTile) {
        const float* w = p.weights + t * (K + 1);
        float s = 0.f;
        for (int j = 0; j <= K; ++j) s = fmaf(w[j], dots[j][threadIdx.x], s);
        p.out[int64_t(t) * p.out_stride + h0 + threadIdx.x] = s;
    }
}

bool view_ok(const WeightView& w, int64_t n, int64_t k) {
    return w.data && w.n == n && w.k == k && k % 16 == 0 && w.layout == WeightLayout::Artifact &&
           (reinterpret_cast<uintptr_t>(w.data) & 15u) == 0 &&
           (w.format == WeightFormat::Bf16 || w.format == WeightFormat::Fp8E4m3RowBf16 ||
            w.format == WeightFormat::Q4G64Fp16);
}

} // namespace detail

size_t moe_decode_logits_floats(int n_experts) { return size_t(kMoeDecodeMaxTokens) * size_t(n_experts + 1); }
size_t moe_decode_work_ints(int n_experts, int top_k) {
    const int entries = std::min(kMoeDecodeMaxTokens * top_k, n_experts) + 1;
    return 1 + size_t(entries) * detail::kMoeEntryInts;
}
size_t moe_decode_act_floats(int top_k, int64_t inter, int64_t shared_inter) {
    return size_t(kMoeDecodeMaxTokens) * size_t(top_k + 1) * size_t(detail::moe_align_up(std::max(inter, shared_inter), 4));
}

cudaError_t moe_decode(const MoeDecodeArgs& a, cudaStream_t stream) {
    using namespace detail;
    const MoeDecodeWeights& w = a.w;
    const int E = w.n_experts, K = w.top_k, n = a.n_tokens;
    const int64_t H = w.router.k, I = w.inter, Is = w.shared_inter;
    const MoeDecodeScratch& s = a.scratch;
    if (n < 1 || n > kMoeDecodeMaxTokens || K < 1 || K > kMoeMaxTopK || E < K || E > kMoeMaxExperts || H % 16 != 0 ||
        I < 16 || I % 16 != 0 || Is < 16 || Is % 16 != 0 || !a.x || !a.out || a.x_stride % 4 != 0 ||
        a.x_stride < H || a.out_stride < H || (reinterpret_cast<uintptr_t>(a.x) & 15u) != 0 ||
        (reinterpret_cast<uintptr_t>(a.out) & 15u) != 0 || !s.logits || !s.ids || !s.weights || !s.work || !s.act ||
        !s.counter || !view_ok(w.router, E, H) || !view_ok(w.shared_score, 1, H) || !view_ok(w.experts_gate_up, int64_t(E) * 2 * I, H) ||
        !view_ok(w.experts_down, int64_t(E) * H, I) || !view_ok(w.shared_gate_up, 2 * Is, H) ||
        !view_ok(w.shared_down, H, Is))
        return cudaErrorInvalidValue;

    const RouteParams r{moe_rows(w.router), moe_rows(w.shared_score), E, K, n, a.x, a.x_stride, s.logits, s.ids,
                        s.weights, s.work, s.counter};
    moe_route_kernel<<<unsigned((E + kRouteRows - 1) / kRouteRows + 1), kRouteWarps * 32, 0, stream>>>(r);
    if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;

    ExpertParams e;
    e.gate_up = moe_rows(w.experts_gate_up);
    e.shared_gate_up = moe_rows(w.shared_gate_up);
    e.down = moe_rows(w.experts_down);
    e.shared_down = moe_rows(w.shared_down);
    e.inter = I;
    e.shared_inter = Is;
    e.hidden = H;
    e.top_k = K;
    e.work = s.work;
    e.ids = s.ids;
    e.weights = s.weights;
    e.x = a.x;
    e.x_stride = a.x_stride;
    e.act = s.act;
    e.act_stride = moe_align_up(std::max(I, Is), 4);
    e.out = a.out;
    e.out_stride = a.out_stride;
    const int entries = std::min(n * K, E) + 1;
    const dim3 gu_grid(unsigned((std::max(I, Is) + kGateUpRowsPerBlock - 1) / kGateUpRowsPerBlock), unsigned(entries));
    moe_gate_up_kernel<<<gu_grid, kExpertWarps * 32, 0, stream>>>(e);
    if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
    moe_down_kernel<<<dim3(unsigned(H / kDownTile), unsigned(n)), kExpertWarps * 32, 0, stream>>>(e);
    return cudaGetLastError();
}

} // namespace ninfer::kernels
