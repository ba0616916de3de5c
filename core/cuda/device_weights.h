// ninfer::core - the CUDA runner's copy of a model's weights in GPU memory.
//
// Contract:
// - DeviceArena owns device allocations (cudaMalloc, 256-byte aligned) and frees them together;
//   alloc() throws ninfer::Error("cuda: out of GPU memory allocating N bytes for WHAT").
// - DeviceModel::upload(weights, arena) copies every matrix in its stored format (bf16,
//   fp8_e4m3fn_row_bf16, q4/q5/q6_g64_fp16, q8_g32_fp16, nvfp4; byte layouts of
//   docs/ARTIFACT_FORMAT.md §3, which are the layouts kernels/gemv.h reads; nvfp4 gets one divisor
//   per row, its matrix's d_w, since rows of matrices with different divisors are concatenated)
//   straight from the artifact's pages, one copy per plane of each stored segment (no host
//   staging). With tiled, every matrix that kernels::gemv reads (all but the embedding and the
//   MoE matrices - router, shared-expert score, experts, shared expert - which the f32-x and MoE
//   decode kernels read in the stored layout) is gathered in a reused device staging buffer and
//   repacked into kernels::WeightLayout::Tiled (the decode GEMV's layout) when its format has one
//   (kernels::gemv_has_tiled_layout: all but nvfp4); bytes then counts the tiled size. nvfp4 rows move in whole 128-row tiles
//   (else Error).
//   Another format is refused with
//   ninfer::Error("cuda: NAME is stored as FORMAT; ...") naming the formats it takes.
// - Attention query and gate are interleaved per head ([query_h | gate_h], docs/MODEL.md §5) into
//   one matrix when both have one format, else kept as two matrices. With tiled, rows of
//   projections that read the same input are concatenated where the formats agree (see
//   DeviceAttention, DeviceGdn, DeviceMlp). MoE experts of a layer become two matrices
//   (all experts' [gate; up] rows, all experts' down rows), one format each.
// - with_mtp: the MTP head's weights (mtp/..., DeviceMtp) the same way, its layer as a text layer.
// - Vectors: norms, A_log, dt_bias as f32; q/k norms, the GDN gated norm and the conv taps
//   ([conv_dim][kernel]) as bf16 for the serving kernels (exact where the stored values are bf16,
//   as a checkpoint's are). With f32_vectors (the runner's f32 check mode) those four also as f32
//   (the *_f32 members, else null), the CPU's values, for the f32 kernels: random test weights
//   hold values that bf16 rounds by up to 2^-9 relative, and that rounding alone flipped a
//   near-tied MoE route of the CPU comparison tests (tests/gpu/cuda_mtp_split.cpp).
// Thread safety: immutable after upload.
#pragma once

#include "core/model/weights.h"
#include "ninfer/kernels/gemv.h"

#include <cuda_bf16.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ninfer::core::cuda {

class DeviceArena {
  public:
    DeviceArena() = default;
    DeviceArena(const DeviceArena&) = delete;
    DeviceArena& operator=(const DeviceArena&) = delete;
    ~DeviceArena();
    void* alloc(uint64_t bytes, const std::string& what);
    template <class T> T* alloc_n(uint64_t count, const std::string& what) {
        return static_cast<T*>(alloc(count * sizeof(T), what));
    }
    uint64_t bytes() const { return bytes_; }

  private:
    std::vector<void*> blocks_;
    uint64_t bytes_ = 0;
};

// Throws ninfer::Error("cuda: WHAT: <cuda error string>") when err is not cudaSuccess.
void cuda_check(int err, const std::string& what);

struct DeviceLinear {
    kernels::WeightView view; // view.data is device memory
    uint64_t bytes = 0;
};

struct DeviceAttention {
    // fused: [query+gate; key; value] rows in one matrix (one launch) when the four share a format
    // and the model is tiled; then query_gate/key/value are empty, else fused is. query_gate: per
    // head [query_h | gate_h] rows when query and gate share a format; else query_gate is empty
    // and query, gate hold them apart.
    DeviceLinear fused, query_gate, query, gate, key, value, output;
    __nv_bfloat16 *query_norm = nullptr, *key_norm = nullptr;
    float *query_norm_f32 = nullptr, *key_norm_f32 = nullptr; // f32_vectors only
};

struct DeviceGdn {
    // in_proj: [query; key; value; z; a; b] rows in one matrix (one launch) when the six share a
    // format and the model is tiled; then qkv, query..b are empty. Else qkv: [query; key; value]
    // when those three share a format (then query/key/value are empty), else (tiled) qk: [query;
    // key] and vz: [value; z] where each pair shares a format (the upstream mix: q4 and q5); ab:
    // [a; b] when they share a format and the model is tiled. Every matrix not in one of those is
    // alone (query, key, value, z, a, b).
    DeviceLinear in_proj, qkv, qk, vz, ab, query, key, value, z, a, b, output;
    __nv_bfloat16* conv = nullptr; // [conv_dim][kernel]
    float *a_log = nullptr, *dt_bias = nullptr;
    __nv_bfloat16* norm = nullptr;
    float *conv_f32 = nullptr, *norm_f32 = nullptr; // f32_vectors only (conv: [conv_dim][kernel])
};

struct DeviceMlp {
    // gate_up: [gate; up] rows in one matrix when both share a format; then gate/up are empty.
    DeviceLinear gate_up, gate, up, down;
};

struct DeviceMoe {
    DeviceLinear router, shared_score;
    DeviceLinear experts_gate_up; // [E * 2I, H]: expert e's gate rows then up rows at e * 2I
    DeviceLinear experts_down;    // [E * H, I]
    DeviceMlp shared;
};

struct DeviceLayer {
    LayerKind kind = LayerKind::LinearAttention;
    float *input_norm = nullptr, *post_attention_norm = nullptr;
    DeviceAttention attention;
    DeviceGdn gdn;
    DeviceMlp mlp;
    DeviceMoe moe;
};

// The MTP head (docs/MODEL.md §8): fc over [norm_e(embedding) | norm_h(hidden)], one
// full-attention decoder layer, its final norm; norms f32 like the layers'.
struct DeviceMtp {
    DeviceLinear input_projection; // [H, 2H], read by kernels::gemv
    float *embedding_norm = nullptr, *hidden_norm = nullptr, *final_norm = nullptr;
    DeviceLayer layer;
};

struct DeviceModel {
    DeviceLinear embedding, output_head;
    float* final_norm = nullptr;
    std::vector<DeviceLayer> layers;
    std::optional<DeviceMtp> mtp; // with_mtp only
    uint64_t bytes = 0;      // weight bytes on the device
    int64_t max_rows = 0;    // largest n of any matrix used with kernels::gemv (scratch sizing)

    // with_mtp: also the MTP head (the weights must have it, else Error), counted in bytes.
    // f32_vectors: the q/k norms, GDN norms and conv taps as f32 (the f32 check mode's kernels).
    static DeviceModel upload(const ModelWeights& weights, DeviceArena& arena, bool tiled, bool with_mtp = false,
                              bool f32_vectors = false);
};

} // namespace ninfer::core::cuda
