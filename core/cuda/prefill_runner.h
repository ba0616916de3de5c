// ninfer::core - the CUDA runner's prefill pass: one chunk of up to max_tokens() tokens of one lane
// through the whole model on tensor cores, writing the lane's KV pages and GDN state as the decode
// path would.
//
// Contract:
// - PrefillRunner(run, max_tokens) allocates, once, every buffer a chunk of max_tokens tokens needs
//   (activations [T][width], one bf16 weight-dequantisation scratch as large as the largest matrix
//   it multiplies, the MoE grouping buffers); nothing is allocated afterwards.
//   workspace_bytes(config, max_tokens) is that size, for memory planning.
// - enqueue_forward(lane, start, ids) runs tokens ids (1..max_tokens(), already checked against the
//   vocabulary) at positions start.. of `lane`: embedding; per layer RMSNorm, projections as
//   bf16 GEMMs (kernels/gemm.h; weights not stored as row-major bf16 are dequantised to bf16
//   first, one matrix at a time), attention prefill over the paged KV (earlier chunks included)
//   or the GDN prefill (conv history and recurrent state continued), the FFN or MoE (tokens
//   grouped by expert, grouped GEMMs), leaving the final-normed rows in its own buffers. The lane's
//   page table must already cover start + ids.size() positions. RoPE takes the KV position plus
//   the lane's Runner::rope_offsets(); with `multimodal` (a prefill_with chunk, checked by the
//   caller, spans of ids.size()) its rows replace the embedded ones (cuda/multimodal_rows.h) and
//   its M-RoPE positions drive RoPE.
// - The same pass in slices (layer-sliced prefill, backend.h prefill_begin/prefill_advance):
//   enqueue_begin(lane, start, ids, multimodal) uploads and embeds the chunk, enqueue_layers(count) runs its
//   next `count` layers and returns how many are left, enqueue_end() (all layers run) applies the
//   final norm; enqueue_forward is the three in a row, so a sliced chunk enqueues exactly the same
//   kernels. Between the calls the chunk lives only in this runner's own buffers (its arena) and
//   the lane's KV pages / GDN slot, never in the Runner's step buffers, so decode steps of other
//   lanes (the Runner's graphs) may be enqueued in between on the same stream.
// - stage_rows(row, n) copies final-normed rows [row, row + n) (n <= kMaxStepTokens; bf16, low
//   halves and f32) into the runner's step rows 0..n-1, so Runner::enqueue_head(0, n) computes
//   their logits exactly as after a decode step.
// - Numerics: activations into the GEMMs are bf16 (as transformers' bf16 forward), weights are
//   the stored values rounded to bf16, sums fp32; the residual stream, norms, router and the
//   shared-expert score stay f32. So prefill agrees with the decode path to bf16 rounding, not
//   bit for bit.
// - Only enqueues work on the runner's stream; no host synchronisation (apart from the upload of
//   ids, which is ordered on the stream).
// Thread safety: engine thread only.
#pragma once

#include "core/cuda/cuda_runner.h"

#include <cstdint>
#include <span>

namespace ninfer::core::cuda {

// Every device buffer of a prefill chunk, in one list (visit) that both the constructor (which
// allocates them) and workspace_bytes (which plans their size) walk, so the two cannot drift apart.
struct PrefillBuffers {
    int32_t* ids_ = nullptr;
    int32_t* rope_thw_ = nullptr; // a multimodal chunk's M-RoPE positions [T][3]
    float *x_ = nullptr, *mix_ = nullptr, *xn32_ = nullptr;
    __nv_bfloat16 *xn_ = nullptr, *xn_lo_ = nullptr;
    __nv_bfloat16 *qg_ = nullptr, *k_ = nullptr, *v_ = nullptr, *attn_ = nullptr;
    __nv_bfloat16 *qkv_ = nullptr, *z_ = nullptr, *y_ = nullptr;
    float *a_ = nullptr, *b_ = nullptr;
    float* gate_up_ = nullptr;
    __nv_bfloat16* act_ = nullptr;
    uint8_t* scratch_ = nullptr;    // kernel scratch (GDN, attention)
    uint64_t scratch_bytes_ = 0;
    __nv_bfloat16* wbuf_ = nullptr; // dequantised weights
    uint64_t wbuf_elems_ = 0;
    // MoE
    float *router_ = nullptr, *route_w_ = nullptr, *score_ = nullptr, *shared_out_ = nullptr, *e_gu_ = nullptr,
          *e_out_ = nullptr;
    int32_t *route_ids_ = nullptr, *counts_ = nullptr, *offsets_ = nullptr, *order_ = nullptr,
            *position_ = nullptr;
    __nv_bfloat16 *e_x_ = nullptr, *e_act_ = nullptr;

    // Calls v(pointer member, element count, name) for every buffer of a chunk of T tokens (and sets
    // wbuf_elems_ and scratch_bytes_).
    template <class Visit> void visit(const ModelConfig& c, uint64_t T, Visit&& v);
};

class PrefillRunner : private PrefillBuffers {
  public:
    PrefillRunner(Runner& run, int max_tokens);
    PrefillRunner(const PrefillRunner&) = delete;
    PrefillRunner& operator=(const PrefillRunner&) = delete;

    static uint64_t workspace_bytes(const ModelConfig& config, int max_tokens);
    int max_tokens() const { return max_tokens_; }
    uint64_t device_bytes() const { return arena_.bytes(); }

    void enqueue_forward(int lane, uint32_t start, std::span<const int32_t> ids,
                         const PrefillInputs* multimodal = nullptr);
    void enqueue_begin(int lane, uint32_t start, std::span<const int32_t> ids,
                       const PrefillInputs* multimodal = nullptr);
    int enqueue_layers(int count);
    void enqueue_end();
    void stage_rows(int row, int n);
    // The last chunk's final-normed f32 rows (row stride row_stride()), until the next chunk.
    const float* final_rows_f32() const { return xn32_; }
    int64_t row_stride() const { return hs_; }
    // The MTP head's catch-up over the chunk just run (prefill_runner_mtp.cpp, core/cuda/mtp_head.h),
    // on the tensor cores: n rows at MTP positions mtp_start.. of `lane` (mtp_start = the chunk's
    // start - 1 with first_hidden the f32 row of that position, or the chunk's start with
    // first_hidden null), row i taking the hidden row of position mtp_start + i (the chunk's own
    // final rows after the first) and the chunk's id ids_offset + i as x_{t+1}; writes the MTP
    // layer's K/V (Runner::mtp_kv_layer) and nothing else anyone reads (the chunk's rows are
    // overwritten: take what is needed of them first). can_run_mtp(): the runner has the head and
    // this runner's buffers hold its [2H] input rows and its fc weights. RoPE takes the position plus
    // the lane's offset; with `multimodal` (n positions and n embedding rows, one per MTP row) its
    // M-RoPE positions drive RoPE and its rows replace the embedded ids where their index is >= 0.
    bool can_run_mtp() const;
    void enqueue_mtp(int lane, uint32_t mtp_start, int n, int ids_offset, float* first_hidden,
                     const PrefillInputs* multimodal = nullptr);

  private:
    void attention(const DeviceLayer& L, uint32_t full_index, int lane, uint32_t start, int n, bool multimodal = false);
    void gdn(const DeviceLayer& L, uint32_t gdn_index, int lane, uint32_t start, int n);
    // gate/up GEMM, SwiGLU, down GEMM into out (f32 rows, stride hs_): the dense FFN and the MoE's
    // shared expert.
    void mlp(const DeviceMlp& mlp, int n, float* out);
    void moe(const DeviceLayer& L, int n);
    // y[m][n] = x[m] . W^T as a bf16 GEMM; W dequantised into the scratch unless it is row-major bf16.
    void linear(const DeviceLinear& w, const __nv_bfloat16* x, int64_t x_stride, int m, void* y, bool y_fp32,
                int64_t y_stride);
    // Rows [row0, row0 + rows) of a matrix already expanded to bf16 (weights_bf16), k columns: the
    // parts of a matrix whose rows the upload concatenated (attention q+gate/k/v, GDN q/k/v/z/a/b).
    void gemm_rows(const __nv_bfloat16* w, int64_t k, int64_t row0, int64_t rows, const __nv_bfloat16* x,
                   int64_t x_stride, int m, void* y, bool y_fp32, int64_t y_stride);
    void query_gate_apart(const DeviceAttention& w, int n);
    const __nv_bfloat16* weights_bf16(const kernels::WeightView& w);

    // The chunk begun by enqueue_begin: its lane, first position, tokens (0: none), next layer, the
    // full-attention / GDN layer indices that layer has, and whether its M-RoPE positions drive RoPE.
    struct Chunk {
        int lane = 0;
        uint32_t start = 0;
        int n = 0;
        uint32_t next_layer = 0, full = 0, gdn = 0;
        bool multimodal = false;
    };
    Chunk chunk_;
    Runner& run_;
    const ModelConfig& config_;
    int max_tokens_ = 0;
    DeviceArena arena_;
    cudaStream_t stream_ = nullptr;
    int64_t hs_ = 0;
    int64_t qg_w_ = 0, kv_w_ = 0, q_w_ = 0, cd_w_ = 0, vd_w_ = 0, hv_w_ = 0, gu_w_ = 0, act_w_ = 0, e_w_ = 0,
            egu_w_ = 0, eact_w_ = 0;
};

} // namespace ninfer::core::cuda
