// ninfer::core - the CUDA runner's forward pass: one step of up to 8 tokens through the whole model
// on one stream, from token ids in device memory to f32 logits in device memory.
//
// Contract:
// - Runner(weights, plan) checks the geometry the kernels specialise on (attention head_dim 256,
//   GDN head dims 128, conv kernel 4, GQA group <= 8, widths multiples of 16) and throws
//   ninfer::Error("cuda: ...") naming what does not fit; then uploads the weights and allocates
//   every buffer the plan implies (KV pool of plan.kv_pages 64-token pages per full-attention layer,
//   in the plan's KV dtype: bf16, or fp8/int8 codes plus scales, kernels::kv_page_bytes() per
//   page; with plan.mtp one more layer, the MTP head's; f32 KV is refused; one GDN slot per lane: conv history [3][conv_dim]
//   bf16 (f32 in the f32-activation mode) and recurrent state [Hv][128][128] f32 per GDN layer;
//   step activations for 8 tokens; logits for 8 step rows and one row per lane). Nothing is
//   allocated afterwards.
// - A step reads tokens/lanes/positions from step_in() (int32 [3][8], written by the caller) and
//   page tables from page_table() ([n_lanes][max_pages]). enqueue_forward(n, one_lane) runs the
//   layers over n tokens: distinct lanes (decode), or consecutive positions of one lane
//   (one_lane: GDN steps token by token; attention is causal through the positions), leaving the
//   final-normed rows in the step buffer; enqueue_head(row, n) writes logits of step rows
//   [row, row+n) to logits() rows 0..n-1 (stride logits_stride()).
// - set_gdn_windows(windows) (verify windows, verify_window.h): while set, enqueue_forward runs
//   each GDN layer's conv and recurrence as one launch each over the windows (kernels/gdn_window.h:
//   window i = lane `lane`'s tokens at step rows rows[0..n) in position order, distinct lanes),
//   writing the state after each of a window's first n - 1 tokens straight into its snapshots
//   (graph-capturable), instead of one_lane's token by token or decode's one launch. Unset (the
//   default): decode and prefill are unchanged.
// - RoPE positions (M-RoPE, backend.h prefill_with): rope_offsets() holds per lane its next text
//   position minus its token count (int32 [n_lanes], zero until the backend writes it), which
//   every attention prep adds to the KV position; enqueue_forward(n, true, &inputs) runs a
//   multimodal block of one lane instead: inputs' rows (host f32, cuda/multimodal_rows.h) replace
//   the embedded rows and its M-RoPE positions drive RoPE (the caller checked them).
// - Every call only enqueues work on stream(): graph-capturable, no host synchronisation.
// Thread safety: engine thread only.
#pragma once

#include "core/backend/backend.h"
#include "core/cuda/device_weights.h"
#include "core/model/memory_plan.h"
#include "ninfer/kernels/attention_decode.h"
#include "ninfer/kernels/gdn_window.h"
#include "ninfer/kernels/moe_decode.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace ninfer::core::cuda {

inline constexpr int kMaxStepTokens = 8;
// Activation rows are padded to 8 elements (16 bytes of bf16: the kernels' vector loads).
inline int64_t pad8(int64_t v) { return (v + 7) / 8 * 8; }

// The attention kernels' geometry of a model, with the CPU reference's f32 math (exact).
kernels::AttnGeometry attention_geometry(const ModelConfig& config);
// The kernels' KV dtype for the plan's (bf16, fp8, int8; the runner refuses f32).
kernels::KvDtype kernel_kv_dtype(KvDtype dtype);

// A forward's verify windows (Runner::set_gdn_windows): window i is lane `lane`'s tokens at step
// rows `rows`, in position order; the state after its token j < rows.size() - 1 goes to copy j of
// its per-GDN-layer snapshot arrays (conv[g]: Runner::conv_bytes_per_lane() bytes a copy;
// recurrent[g]: recurrent_floats_per_lane() floats a copy).
struct GdnWindowPlan {
    struct Window {
        int lane = 0;
        std::vector<int> rows;
        const std::vector<uint8_t*>* conv = nullptr;
        const std::vector<float*>* recurrent = nullptr;
    };
    std::vector<Window> windows;
};

class Runner {
  public:
    // f32_activations: the check mode. Every value the CPU reference (core/cpu/forward.cpp) keeps
    // in f32 stays f32: projections read f32 rows through a plain kernel (gemv_f32x) and write f32
    // rows, the mixers run kernels/mixers_f32.h (f32 queries, attention output, GDN conv history,
    // conv output and GDN output); only the KV pool keeps the plan's dtype, as the CPU's does. Slow,
    // for checking the runner against the CPU reference to the last digits: a near-tied MoE route
    // flips under any bf16 rounding of these (kernels/PERF_NOTES.md, "f32-activation check mode").
    // Otherwise q4 projections take kernels::GemvArgs::x_int8 (W4A8, gemv.h).
    Runner(const ModelWeights& weights, const MemoryPlan& plan, bool f32_activations = false);
    ~Runner();
    Runner(const Runner&) = delete;
    Runner& operator=(const Runner&) = delete;

    cudaStream_t stream() const { return stream_; }
    int32_t* step_in() const { return step_in_; } // [0..8) tokens, [8..16) lanes, [16..24) positions
    int32_t* page_table() const { return page_table_; }
    int max_pages() const { return max_pages_; }
    float* logits() const { return logits_; }
    float* lane_logits() const { return lane_logits_; }
    int64_t logits_stride() const { return logits_stride_; }
    const ModelConfig& config() const { return config_; }
    const MemoryPlan& plan() const { return plan_; }
    const DeviceModel& model() const { return model_; }
    bool f32_activations() const { return f32_; }
    // The step's final-normed rows (bf16, their low halves and f32, stride hidden_stride()) that
    // enqueue_head reads.
    __nv_bfloat16* step_rows() const { return xn_; }
    float* step_rows_f32() const { return xn32_; }
    __nv_bfloat16* step_rows_lo() const { return xn_lo_; } // low bf16 halves (gemv.h x_lo)
    int64_t hidden_stride() const { return hs_; }
    uint64_t device_bytes() const { return arena_.bytes(); }
    uint64_t weight_bytes() const { return model_.bytes; }

    // KV pool and GDN state addresses (lane images). Pages are kernels::KvPages' (attention_decode.h)
    // for the plan's KV dtype: bf16 rows, or fp8/int8 codes then their 16-bit scales.
    uint8_t* kv_k(uint32_t full_layer) const { return kv_k_[full_layer]; }
    uint8_t* kv_v(uint32_t full_layer) const { return kv_v_[full_layer]; }
    uint64_t kv_page_bytes() const; // one page of one layer's K (or V)
    kernels::KvPages kv_pages(uint32_t full_layer) const; // the attention kernels' view of a layer's pool
    // Conv history: bf16 (conv_state) or, in the f32-activation mode, f32 (conv_state_f32); the
    // other one is null.
    __nv_bfloat16* conv_state(uint32_t gdn_layer) const { return f32_ ? nullptr : conv_[gdn_layer]; }
    float* conv_state_f32(uint32_t gdn_layer) const { return f32_ ? f32m_.conv[gdn_layer] : nullptr; }
    float* recurrent_state(uint32_t gdn_layer) const { return recurrent_[gdn_layer]; }
    uint64_t conv_elems_per_lane() const; // [3][conv_dim]
    uint64_t recurrent_floats_per_lane() const; // [Hv][128][128]
    uint64_t conv_bytes_per_lane() const { return conv_elems_per_lane() * (f32_ ? 4 : 2); }
    uint8_t* conv_state_bytes(uint32_t gdn_layer, int lane) const; // the lane's conv history, either dtype

    void set_gdn_windows(const GdnWindowPlan* windows) { gdn_windows_ = windows; }

    int32_t* rope_offsets() const { return rope_offsets_; }
    void enqueue_forward(int n, bool one_lane, const PrefillInputs* multimodal = nullptr);
    void enqueue_head(int row, int n);

    // The MTP head (cuda_runner_mtp.cpp, docs/MODEL.md §8), uploaded when the plan has mtp (the
    // weights must then have it). enqueue_mtp(n, hidden, stride) runs step rows 0..n-1 (any mix of
    // lanes and positions; step_in(): the token x_{t+1}, the lane, the MTP position t) through
    // fc([norm_e(embed(x_{t+1})) | norm_h(h_t)]) with h_t the f32 rows at hidden, the MTP layer
    // (its K/V at position t in KV layer mtp_kv_layer(), the lanes' page tables) and mtp.final_norm,
    // leaving d in the step rows: enqueue_head gives the draft logits, step_rows_f32() is d.
    // RoPE takes the position t plus the lane's rope_offsets(); with `multimodal` (n positions and
    // n embedding rows, cuda/multimodal_rows.h) its M-RoPE positions drive RoPE instead and its
    // rows replace the embedded x_{t+1} where their index is >= 0 (a prefill_with chunk's
    // placeholders, docs/MODEL.md §8).
    bool has_mtp() const { return model_.mtp.has_value(); }
    uint32_t mtp_kv_layer() const { return config_.n_full_attention_layers(); }
    void enqueue_mtp(int n, float* hidden, int64_t hidden_stride, const PrefillInputs* multimodal = nullptr);

  private:
    void attention(const DeviceLayer& L, uint32_t full_index, int n);
    void gdn(const DeviceLayer& L, uint32_t gdn_index, int n, bool one_lane);
    void ffn(const DeviceLayer& L, int n);
    void moe(const DeviceLayer& L, int n);
    // cuda_runner_formats.cpp: the MoE layer in separate launches for formats moe_decode does not
    // read; query and gate in two formats.
    bool needs_generic_moe() const;
    void alloc_generic_moe();
    void moe_generic(const DeviceLayer& L, int n);
    void query_gate_apart(const DeviceAttention& w, int n);
    void interleave_query_gate(void* qg, const void* sep, size_t elem_bytes, int n);
    void alloc_mtp(); // cuda_runner_mtp.cpp: the head's input rows
    // cuda_runner_f32.cpp: the f32-activation mode's buffers and mixers (kernels/mixers_f32.h).
    void alloc_f32_mixers();
    void attention_f32(const DeviceLayer& L, uint32_t full_index, int n);
    void gdn_f32(const DeviceLayer& L, uint32_t gdn_index, int n, bool one_lane);
    // The GDN launches of enqueue_forward without windows: one_lane's token by token (launch i
    // over row i), else one over every row; with windows (verify_window.cpp) layer g's kernel
    // view of them.
    static int gdn_launches(int n, bool one_lane) { return one_lane ? n : 1; }
    kernels::GdnWindows gdn_windows(uint32_t gdn_index) const;
    const GdnWindowPlan* gdn_windows_ = nullptr;
    // y = w . x for n rows of x (stride x_stride). x_lo: the low bf16 halves of x (kernels/gemv.h),
    // used when w is tiled; x32: the same rows in f32, read instead in the f32-activation mode.
    // y_tail: rows >= tail_row0 go there as f32 (gemv.h).
    // Whether linear() of w over n tokens takes the q4 int8 route (kernels::gemv_runs_int8_x).
    bool runs_int8(const DeviceLinear& w, int n) const;
    void linear(const DeviceLinear& w, const __nv_bfloat16* x, const __nv_bfloat16* x_lo, const float* x32,
                int64_t x_stride, int n, void* y, bool y_fp32, int64_t y_stride, float* y_tail = nullptr,
                int64_t tail_row0 = 0, int64_t tail_stride = 0);

    ModelConfig config_;
    MemoryPlan plan_;
    DeviceArena arena_;
    DeviceModel model_;
    cudaStream_t stream_ = nullptr;
    int max_pages_ = 0;
    int64_t hs_ = 0, logits_stride_ = 0; // padded hidden size, padded vocab
    // Step inputs and activations.
    int32_t* step_in_ = nullptr;
    int32_t* page_table_ = nullptr;
    int32_t* rope_offsets_ = nullptr; // [n_lanes]
    int32_t* step_rope_ = nullptr;    // [8][3] a multimodal block's M-RoPE positions
    bool step_rope_now_ = false;      // within enqueue_forward of a multimodal block
    bool f32_ = false;
    // q4 projections take int8 activations (W4A8) everywhere but the f32 check mode.
    bool q4_int8_x() const { return !f32_; }
    // The int8 route's x written by its producers (gemv.h Int8X; cuda_runner.cpp producer_writes_int8_x):
    // the normed rows (the layers' add_rmsnorm into xn_ while x8_now_, i.e. within enqueue_forward at
    // batch >= 2) and the dense MLP's SwiGLU rows (act8_live_ while its down projection is
    // enqueued); q null when never used (f32 mode, hidden <= 4096).
    kernels::Int8X xn8_, act8_;
    bool x8_now_ = false, act8_live_ = false;
    float *x_ = nullptr, *mix_ = nullptr, *xn32_ = nullptr, *act32_ = nullptr; // f32 copies of xn_, act_
    __nv_bfloat16 *xn_ = nullptr, *xn_lo_ = nullptr, *act_lo_ = nullptr; // bf16 rows and their low halves
    // qg_, k_, v_: views into one [query+gate | key | value] row buffer (stride qgkv_w_).
    __nv_bfloat16 *qg_ = nullptr, *k_ = nullptr, *v_ = nullptr, *q_ = nullptr, *attn_ = nullptr;
    __nv_bfloat16* q_sep_ = nullptr; // [query rows of 8 tokens][gate rows of 8 tokens] (two formats)
    float* attn_scratch_ = nullptr;
    size_t attn_scratch_floats_ = 0;
    // qkv_, z_: views into one [q | k | v | z] row buffer (stride qkvz_w_); a_: f32 [a | b] rows
    // (stride ab_w_; f32: the decay and beta are sensitive to their rounding).
    __nv_bfloat16 *qkv_ = nullptr, *conv_out_ = nullptr, *z_ = nullptr, *y_ = nullptr;
    float* a_ = nullptr;
    float* gate_up_ = nullptr;
    __nv_bfloat16* act_ = nullptr;
    kernels::MoeDecodeScratch moe_;
    struct GenericMoe {
        bool enabled = false;
        int64_t e_w = 0, egu_w = 0, eact_w = 0; // padded widths: experts, expert gate+up, expert inter
        float *router = nullptr, *weights = nullptr, *expert_gu = nullptr, *expert_act = nullptr,
              *expert_out = nullptr, *shared_out = nullptr, *score = nullptr;
        int32_t* ids = nullptr;
    } generic_moe_;
    // The f32-activation mode's rows (strides as their bf16 counterparts': qgkv_w_, q_w_, qkvz_w_,
    // cd_w_, vd_w_), attention scores and conv history per GDN layer ([n_lanes][3][conv_dim]).
    struct F32Mixers {
        float *qgkv = nullptr, *q_sep = nullptr, *q = nullptr, *attn = nullptr, *scores = nullptr;
        float *qkvz = nullptr, *conv_out = nullptr, *y = nullptr;
        std::vector<float*> conv;
    } f32m_;
    float *logits_ = nullptr, *lane_logits_ = nullptr;
    // The MTP head's input rows [8][2 * hs_]: [norm_e(embedding) | norm_h(hidden)], bf16 with
    // their low halves, and f32.
    __nv_bfloat16 *mtp_in_ = nullptr, *mtp_in_lo_ = nullptr;
    float* mtp_in32_ = nullptr;
    kernels::GemvScratch scratch_;
    std::vector<uint8_t*> kv_k_, kv_v_;
    std::vector<__nv_bfloat16*> conv_;
    std::vector<float*> recurrent_;
    // Padded widths (elements) of the step buffers.
    int64_t qgkv_w_ = 0, q_w_ = 0, cd_w_ = 0, qkvz_w_ = 0, vd_w_ = 0, ab_w_ = 0, gu_w_ = 0, act_w_ = 0;
};

} // namespace ninfer::core::cuda
