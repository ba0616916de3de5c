// ninfer::kernels - gated full attention for decode (one new token per lane) over the paged KV
// pool, docs/MODEL.md §5.
//
// KV pool of one layer: K pages and V pages. A lane's token at position p lives in page
// page_table[lane * max_pages + p / 64], row p % 64. K is stored after k_norm and RoPE, V raw.
// - KvDtype::Bf16: kv.k / kv.v, each [n_pages][n_kv_heads][64][head_dim] bf16.
// - KvDtype::Fp8 / Int8 (docs/MODEL.md §11, core/model/kv_codec.h's row codecs): kv.k_q / kv.v_q,
//   pages of kv_page_bytes() bytes: codes [n_kv_heads][64][head_dim] (E4M3 / int8), then 16-bit
//   scales [n_kv_heads][64][kv_scales_per_row()] (fp8: one bf16 per row, scale = bf16(amax/448), a
//   zero word with amax > 0 becomes 0x0001, code = e4m3(clamp(x * (1/scale), +-448)); int8: one
//   fp16 per 64 values, scale = f16(amax/127) (0 -> 0x0001 likewise), code = clamp(rint(x *
//   (1/scale)), +-127)); value = code * scale. Quantised from the f32 K after norm and RoPE and
//   from V.
//
// 1. attn_decode_prep: token t (lane lanes[t], position positions[t]) takes the q_proj output
//    qg [t][n_heads][2*head_dim] (per head: query | gate) and k, v [t][n_kv_heads*head_dim]:
//    q = rope(offset_rmsnorm(query, q_norm)) -> q_out [t][n_heads*head_dim] bf16;
//    k = rope(offset_rmsnorm(k, k_norm)) and v are written into the pool at positions[t].
//    RoPE: NeoX halves over the first rotary_dim dims, theta^(-2i/rotary_dim), cos/sin computed in
//    fp32 and rounded to bf16, out = bf16(bf16(x*cos) + bf16(rot(x)*sin)) as the reference does.
//    The RoPE position (docs/MODEL.md §5, M-RoPE; the KV slot stays positions[t]): with rope_thw,
//    token t's own temporal, height and width positions rope_thw[3t..3t+2], pair i taking the
//    axis geo.mrope_section assigns it (interleaved: height where i%3==1 && i<3*s[1], width where
//    i%3==2 && i<3*s[2], else temporal; contiguous: [t | h | w] sections; all zero: temporal);
//    else positions[t] + rope_offset[lanes[t]] on all three axes (rope_offset null: + 0), the
//    text after a multimodal span (backend.h prefill_with).
// 2. attn_decode: o_h = softmax(q_h . K^T * head_dim^-0.5) V over positions [0, positions[t]]
//    (the new token included), query head h reading KV head h / (n_heads / n_kv_heads); fp32
//    math; then out = bf16(float(bf16(o)) * float(bf16(sigmoid(gate)))) -> out [t][n_heads*head_dim].
//    The context of each token is split into at most n_chunks ranges of whole 64-token pages
//    (n_chunks fixed by n_kv_heads and max_context: about 2 blocks per SM per token, <= 132), sized
//    by that token's own length, so the grid is fixed per graph, every depth uses the whole GPU and
//    a lane's sums never depend on the other lanes. One block per (range, KV head, token) runs the
//    GQA group's scores and P V on tensor cores (bf16 operands: q, K and V rows exactly, fp8 / int8
//    codes widened exactly with their scales applied in f32, P as a bf16 high + low pair; f32
//    accumulators), an online softmax per warp; a second kernel merges the ranges and applies the
//    gate. scratch must hold attn_decode_scratch_floats(n_tokens, n_heads, max_context) floats.
//    Two schedules, the same arithmetic (the same output bits: [attention_decode] checks it):
//    - AttnDecodePath::Split: the partial kernel waits for the previous
//      kernel, then loads one 16-token slice ahead per warp in registers; the combine reads the
//      partials in rounds.
//    - AttnDecodePath::Staged (bf16 pools only, fp8 / int8 take Split): the
//      partial kernel reads positions, lanes, the page table and every KV row below
//      positions[t] - (n_tokens - 1) BEFORE the PDL wait (a warp's first slice into registers, its
//      second through cp.async into shared memory, so a block of up to 8 slices has all its bytes
//      in flight before its predecessor ends), reloads the rows at and above that bound after the
//      wait, and keeps a second slice in flight per warp through shared memory; the combine reads
//      the positions before the wait and issues every load (m, l, all partials, the gate) at once.
//      Extra requirement: nothing still running on the stream writes positions, lanes, the page
//      table or pool rows below positions[t] - (n_tokens - 1) (the runner: host copies and
//      synchronised forwards; a lane's tokens in one call hold consecutive positions).
//    - AttnDecodePath::Auto (the default): Staged for one token, Split for more
//      (attn_decode_schedule). Measured in the whole 27B step (kernels/PERF_NOTES.md, session 6):
//      Staged's early loads win at batch 1 at every depth; at batch 8 its loop loses once the grid
//      is more than one wave. Same extra requirement as Staged when it takes it.
// - Requirements: head_dim == 256, rotary_dim even and <= head_dim, n_heads % n_kv_heads == 0,
//   n_heads / n_kv_heads <= 8, positions[t] < max_context, 16-byte aligned rows; lanes distinct.
//   Violations the host can see return cudaErrorInvalidValue; device-side indices are trusted.
// - Kernels start by programmatic dependent launch (kernels/src/common.cuh launch_pdl) and wait
//   for the previous kernel on the stream before touching memory.
// Thread safety: stateless apart from the pool; graph-capturable (grid sized by max_context).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace ninfer::kernels {

constexpr int kKvPageTokens = 64;

struct AttnGeometry {
    int n_heads = 0;
    int n_kv_heads = 0;
    int head_dim = 256;
    int rotary_dim = 64;
    float rope_theta = 1e7f;
    float eps = 1e-6f;
    // CPU-reference math (the CUDA runner): f32 norm/RoPE results and output gate, no bf16
    // rounding between the steps above (q and K/V are still stored as bf16).
    bool exact = false;
    // M-RoPE (docs/MODEL.md §5): rotary pairs per axis (t, h, w; sums to rotary_dim / 2), and
    // whether the axes interleave. All zero: every pair takes the temporal position.
    int mrope_section[3] = {0, 0, 0};
    bool mrope_interleaved = false;
};

enum class KvDtype : uint8_t { Bf16, Fp8, Int8 };

struct KvPages {
    __nv_bfloat16* k = nullptr; // Bf16 pools
    __nv_bfloat16* v = nullptr;
    const int32_t* page_table = nullptr; // [n_lanes][max_pages]
    int max_pages = 0;
    KvDtype dtype = KvDtype::Bf16;
    uint8_t* k_q = nullptr; // Fp8 / Int8 pools
    uint8_t* v_q = nullptr;
};

// 16-bit scales per KV row of head_dim values and bytes of one page of one layer's K (or V).
constexpr int kv_scales_per_row(KvDtype dtype, int head_dim) {
    return dtype == KvDtype::Fp8 ? 1 : dtype == KvDtype::Int8 ? (head_dim + 63) / 64 : 0;
}
constexpr size_t kv_page_bytes(KvDtype dtype, int n_kv_heads, int head_dim) {
    return size_t(n_kv_heads) * kKvPageTokens *
           (dtype == KvDtype::Bf16 ? 2 * size_t(head_dim) : size_t(head_dim) + 2 * size_t(kv_scales_per_row(dtype, head_dim)));
}

struct AttnPrepArgs {
    AttnGeometry geo;
    const __nv_bfloat16* qg = nullptr;
    int64_t qg_stride = 0;
    const __nv_bfloat16* k = nullptr;
    int64_t k_stride = 0;
    const __nv_bfloat16* v = nullptr;
    int64_t v_stride = 0;
    const __nv_bfloat16* q_norm = nullptr;
    const __nv_bfloat16* k_norm = nullptr;
    const int32_t* lanes = nullptr;
    const int32_t* positions = nullptr;
    KvPages kv;
    __nv_bfloat16* q_out = nullptr;
    int64_t q_out_stride = 0;
    int n_tokens = 0;
    const int32_t* rope_thw = nullptr;    // [n_tokens][3] M-RoPE positions, or null
    const int32_t* rope_offset = nullptr; // [n_lanes] text RoPE position - KV position, or null
};

struct AttnDecodeArgs {
    AttnGeometry geo;
    const __nv_bfloat16* q = nullptr; // prep's q_out
    int64_t q_stride = 0;
    const __nv_bfloat16* qg = nullptr; // for the gate half
    int64_t qg_stride = 0;
    const int32_t* lanes = nullptr;
    const int32_t* positions = nullptr;
    KvPages kv;
    __nv_bfloat16* out = nullptr;
    int64_t out_stride = 0;
    int n_tokens = 0;
    int max_context = 0;
    float* scratch = nullptr;
    size_t scratch_floats = 0;
};

// Auto (the default) picks Split or Staged by the token count (attn_decode_schedule); fp8 / int8
// pools always take Split.
enum class AttnDecodePath : uint8_t { Split = 0, Auto = 1, Staged = 2 };

size_t attn_decode_scratch_floats(int n_tokens, int n_heads, int max_context);
// The schedule `path` runs for n_tokens tokens: Auto -> Staged for 1, Split above; others unchanged.
AttnDecodePath attn_decode_schedule(AttnDecodePath path, int n_tokens);
cudaError_t attn_decode_prep(const AttnPrepArgs& args, cudaStream_t stream);
cudaError_t attn_decode(const AttnDecodeArgs& args, cudaStream_t stream); // AttnDecodePath::Auto
cudaError_t attn_decode_with(const AttnDecodeArgs& args, AttnDecodePath path, cudaStream_t stream);

} // namespace ninfer::kernels
