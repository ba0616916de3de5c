// ninfer::core - uploads a model's weights to the GPU in their stored formats (CUDA runner).
#include "core/cuda/device_weights.h"

#include "core/formats/codec.h"
#include "core/formats/format.h"
#include "core/formats/layout.h"
#include "core/util/error.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

namespace ninfer::core::cuda {

namespace {

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

struct RowPiece {
    const Matrix* m;
    uint64_t row_begin, n_rows;
};

kernels::WeightFormat kernel_format(const StoredTensor& t, const std::string& what) {
    switch (t.format) {
    case TensorFormat::Bf16: return kernels::WeightFormat::Bf16;
    case TensorFormat::Fp8E4m3fnRowBf16: return kernels::WeightFormat::Fp8E4m3RowBf16;
    case TensorFormat::Q4G64Fp16: return kernels::WeightFormat::Q4G64Fp16;
    case TensorFormat::Q5G64Fp16: return kernels::WeightFormat::Q5G64Fp16;
    case TensorFormat::Q6G64Fp16: return kernels::WeightFormat::Q6G64Fp16;
    case TensorFormat::Q8G32Fp16: return kernels::WeightFormat::Q8G32Fp16;
    case TensorFormat::Nvfp4: return kernels::WeightFormat::Nvfp4;
    case TensorFormat::Fp32:
    case TensorFormat::Int32: break;
    }
    throw Error("cuda: " + what + " is stored as " + std::string(format_name(t.format)) +
                "; the CUDA backend takes matrices in bf16, fp8_e4m3fn_row_bf16, q4/q5/q6_g64_fp16, "
                "q8_g32_fp16 and nvfp4");
}

// Planes of one encoding: per row, the bytes of its codes, high bits and scales at their plane
// offsets (docs/ARTIFACT_FORMAT.md §3.2-3.4). nvfp4 scales are per 128-row tile, so rows move in
// whole tiles there; its divisor is handled apart (one per matrix in the artifact, one per row on
// the device).
struct Planes {
    uint64_t code_row = 0, high_off = 0, high_row = 0, scale_off = 0, scale_row = 0;
};
Planes planes_of(kernels::WeightFormat f, uint64_t n, uint64_t k) {
    using kernels::WeightFormat;
    switch (f) {
    case WeightFormat::Bf16: return {2 * k, 0, 0, 0, 0};
    case WeightFormat::Fp8E4m3RowBf16: return {k, 0, 0, align_up(n * k, 256), 2};
    case WeightFormat::Nvfp4: return {k / 2, 0, 0, align_up(n * k / 2, 256), k / 16};
    case WeightFormat::Q4G64Fp16:
    case WeightFormat::Q5G64Fp16:
    case WeightFormat::Q6G64Fp16:
    case WeightFormat::Q8G32Fp16: break;
    }
    const uint64_t group = f == WeightFormat::Q8G32Fp16 ? 32 : 64;
    const uint64_t high_group = f == WeightFormat::Q5G64Fp16 ? 8 : f == WeightFormat::Q6G64Fp16 ? 16 : 0;
    const uint64_t g = align_up(k, 128) / group;
    const uint64_t high_off = align_up(n * g * 32, 256);
    return {g * 32, high_off, g * high_group, high_off + align_up(n * g * high_group, 256), 2 * g};
}

// Device memory for artifact-layout matrices on their way to the tiled layout, reused and grown.
class Staging {
  public:
    Staging() = default;
    Staging(const Staging&) = delete;
    Staging& operator=(const Staging&) = delete;
    ~Staging() {
        if (p_)
            cudaFree(p_);
    }
    uint8_t* get(uint64_t bytes, const std::string& what) {
        if (bytes > size_) {
            if (p_)
                cudaFree(p_);
            p_ = nullptr;
            size_ = 0;
            if (cudaMalloc(&p_, bytes) != cudaSuccess)
                throw Error("cuda: out of GPU memory staging " + std::to_string(bytes) + " bytes for " + what);
            size_ = bytes;
        }
        return static_cast<uint8_t*>(p_);
    }

  private:
    void* p_ = nullptr;
    uint64_t size_ = 0;
};

// staging: null keeps the artifact layout; else the rows are gathered there and repacked into the
// tiled decode layout (kernels/gemv.h) in the arena.
DeviceLinear upload_rows(const std::vector<RowPiece>& pieces, DeviceArena& arena, const std::string& what,
                         Staging* staging = nullptr) {
    uint64_t n = 0;
    const uint64_t k = pieces.at(0).m->cols();
    for (const RowPiece& p : pieces) {
        if (p.m->cols() != k)
            throw Error("cuda: " + what + ": pieces of different widths");
        n += p.n_rows;
    }
    const kernels::WeightFormat f = kernel_format(*pieces[0].m->segments().at(0).tensor, what);
    DeviceLinear d;
    d.bytes = kernels::weight_bytes(f, int64_t(n), int64_t(k));
    uint8_t* dst = staging ? staging->get(d.bytes, what) : static_cast<uint8_t*>(arena.alloc(d.bytes, what));
    cuda_check(cudaMemset(dst, 0, d.bytes), "clearing " + what);
    const Planes out = planes_of(f, n, k);
    const bool nvfp4 = f == kernels::WeightFormat::Nvfp4;
    std::vector<float> divisors(nvfp4 ? n : 0); // nvfp4: each row keeps its source matrix's d_w
    // Row runs to copy, adjacent runs of one tensor merged (the experts of a layer are one parent,
    // so their pieces are one run: nvfp4 needs whole 128-row tiles only per run).
    struct Run {
        const StoredTensor* t;
        uint64_t trow, orow, rows;
    };
    std::vector<Run> runs;
    uint64_t at = 0; // logical output row
    for (const RowPiece& p : pieces) {
        const uint64_t end = p.row_begin + p.n_rows;
        for (const Matrix::Segment& s : p.m->segments()) {
            const uint64_t lo = std::max(p.row_begin, s.logical_row), hi = std::min(end, s.logical_row + s.n_rows);
            if (lo >= hi)
                continue;
            if (kernel_format(*s.tensor, what) != f)
                throw Error("cuda: " + what + " mixes tensor formats; the CUDA backend needs one format here");
            const Run r{s.tensor, s.tensor_row + (lo - s.logical_row), at + (lo - p.row_begin), hi - lo};
            if (!runs.empty() && runs.back().t == r.t && runs.back().trow + runs.back().rows == r.trow &&
                runs.back().orow + runs.back().rows == r.orow)
                runs.back().rows += r.rows;
            else
                runs.push_back(r);
        }
        at += p.n_rows;
    }
    for (const Run& r : runs) {
        const StoredTensor& t = *r.t;
        const Planes in = planes_of(f, tensor_rows(t), k);
        if (nvfp4) {
            if (r.trow % 128 || r.orow % 128 || r.rows % 128)
                throw Error("cuda: " + what + ": nvfp4 rows must move in whole 128-row tiles");
            float d_w = 0;
            std::memcpy(&d_w, t.data + nvfp4_geometry(tensor_rows(t), k).div_off, 4);
            std::fill_n(divisors.begin() + int64_t(r.orow), r.rows, d_w);
        }
        cuda_check(cudaMemcpy(dst + r.orow * out.code_row, t.data + r.trow * in.code_row, r.rows * in.code_row,
                              cudaMemcpyHostToDevice), "uploading " + what);
        if (in.high_row)
            cuda_check(cudaMemcpy(dst + out.high_off + r.orow * out.high_row, t.data + in.high_off + r.trow * in.high_row,
                                  r.rows * in.high_row, cudaMemcpyHostToDevice), "uploading " + what);
        if (in.scale_row)
            cuda_check(cudaMemcpy(dst + out.scale_off + r.orow * out.scale_row,
                                  t.data + in.scale_off + r.trow * in.scale_row, r.rows * in.scale_row,
                                  cudaMemcpyHostToDevice), "uploading " + what);
    }
    if (nvfp4)
        cuda_check(cudaMemcpy(dst + out.scale_off + n * out.scale_row, divisors.data(), 4 * n, cudaMemcpyHostToDevice),
                   "uploading " + what);
    d.view = {f, dst, int64_t(n), int64_t(k)};
    if (!staging)
        return d;
    d.bytes = kernels::tiled_weight_bytes(f, int64_t(n), int64_t(k));
    uint8_t* tiled = static_cast<uint8_t*>(arena.alloc(d.bytes, what));
    cuda_check(kernels::gemv_pack_tiled(d.view, tiled, nullptr), "repacking " + what);
    cuda_check(cudaDeviceSynchronize(), "repacking " + what); // the staging buffer is reused next
    d.view.data = tiled;
    d.view.layout = kernels::WeightLayout::Tiled;
    return d;
}

template <class T> T* upload_vector(const std::vector<T>& v, DeviceArena& arena, const std::string& what) {
    T* d = arena.alloc_n<T>(v.size(), what);
    cuda_check(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "uploading " + what);
    return d;
}

std::vector<__nv_bfloat16> to_bf16(const std::vector<float>& v) {
    std::vector<__nv_bfloat16> out(v.size());
    for (size_t i = 0; i < v.size(); ++i)
        out[i] = __float2bfloat16(v[i]);
    return out;
}

class Uploader {
  public:
    Uploader(DeviceArena& arena, DeviceModel& model, bool tiled, bool f32_vectors)
        : arena_(arena), model_(model), tiled_(tiled), f32_vectors_(f32_vectors) {}

    // gemv: read by kernels::gemv (tiled when the model is); f32x: read by the f32-x kernels only.
    DeviceLinear linear(const Matrix& m, const std::string& what, bool gemv = true) {
        return pieces({{&m, 0, m.rows()}}, what, gemv);
    }
    DeviceLinear f32x(const Matrix& m, const std::string& what) {
        return track(upload_rows({{&m, 0, m.rows()}}, arena_, what), true);
    }
    DeviceLinear pieces(const std::vector<RowPiece>& p, const std::string& what, bool gemv) {
        const bool tile = gemv && tiled_ && p.at(0).m->cols() % 16 == 0 &&
                          kernels::gemv_has_tiled_layout(kernel_format(*p.at(0).m->segments().at(0).tensor, what));
        return track(upload_rows(p, arena_, what, tile ? &staging_ : nullptr), gemv);
    }
    bool tiled() const { return tiled_; }
    bool f32_vectors() const { return f32_vectors_; }
    float* f32(const std::vector<float>& v, const std::string& what) { return upload_vector(v, arena_, what); }
    __nv_bfloat16* bf16(const std::vector<float>& v, const std::string& what) {
        return upload_vector(to_bf16(v), arena_, what);
    }

  private:
    DeviceLinear track(DeviceLinear d, bool gemv) {
        model_.bytes += d.bytes;
        if (gemv)
            model_.max_rows = std::max(model_.max_rows, d.view.n);
        return d;
    }
    DeviceArena& arena_;
    DeviceModel& model_;
    bool tiled_, f32_vectors_;
    Staging staging_;
};

bool one_format(const std::vector<const Matrix*>& ms) {
    for (const Matrix* m : ms)
        for (const Matrix::Segment& s : m->segments())
            if (s.tensor->format != ms[0]->segments().at(0).tensor->format || m->cols() != ms[0]->cols())
                return false;
    return true;
}

std::vector<RowPiece> whole(const std::vector<const Matrix*>& ms) {
    std::vector<RowPiece> p;
    for (const Matrix* m : ms)
        p.push_back({m, 0, m->rows()});
    return p;
}

// gemv: read by kernels::gemv (else by the MoE decode kernels, in the stored layout).
DeviceMlp upload_mlp(Uploader& up, const MlpWeights& w, const std::string& name, bool gemv) {
    DeviceMlp d;
    if (one_format({&w.gate, &w.up})) {
        d.gate_up = up.pieces(whole({&w.gate, &w.up}), name + "/gate+up", gemv);
    } else {
        d.gate = up.linear(w.gate, name + "/gate", gemv);
        d.up = up.linear(w.up, name + "/up", gemv);
    }
    d.down = up.linear(w.down, name + "/down", gemv);
    return d;
}

// One decoder layer under the name prefix p ("text/layers/N", "mtp/layers/0").
DeviceLayer upload_layer(Uploader& up, const ModelConfig& c, const LayerWeights& L, const std::string& p) {
    DeviceLayer d;
    d.kind = L.kind;
    d.input_norm = up.f32(L.input_norm, p + "/input_norm");
    d.post_attention_norm = up.f32(L.post_attention_norm, p + "/post_attention_norm");
    if (L.kind == LayerKind::FullAttention) {
        const AttentionWeights& a = L.attention;
        if (one_format({&a.query, &a.gate})) {
            std::vector<RowPiece> qg;
            for (uint32_t h = 0; h < c.num_attention_heads; ++h) {
                qg.push_back({&a.query, uint64_t(h) * c.head_dim, c.head_dim});
                qg.push_back({&a.gate, uint64_t(h) * c.head_dim, c.head_dim});
            }
            if (up.tiled() && one_format({&a.query, &a.gate, &a.key, &a.value})) {
                qg.push_back({&a.key, 0, a.key.rows()});
                qg.push_back({&a.value, 0, a.value.rows()});
                d.attention.fused = up.pieces(qg, p + "/attention/query+gate+key+value", true);
            } else {
                d.attention.query_gate = up.pieces(qg, p + "/attention/query+gate", true);
            }
        } else { // e.g. the upstream mix: query q4, gate q5
            d.attention.query = up.linear(a.query, p + "/attention/query");
            d.attention.gate = up.linear(a.gate, p + "/attention/gate");
        }
        if (!d.attention.fused.view.data) {
            d.attention.key = up.linear(a.key, p + "/attention/key");
            d.attention.value = up.linear(a.value, p + "/attention/value");
        }
        d.attention.output = up.linear(a.output, p + "/attention/output");
        d.attention.query_norm = up.bf16(a.query_norm, p + "/attention/query_norm");
        d.attention.key_norm = up.bf16(a.key_norm, p + "/attention/key_norm");
        if (up.f32_vectors()) {
            d.attention.query_norm_f32 = up.f32(a.query_norm, p + "/attention/query_norm (f32)");
            d.attention.key_norm_f32 = up.f32(a.key_norm, p + "/attention/key_norm (f32)");
        }
    } else {
        const GdnWeights& g = L.gdn;
        const std::string q = p + "/linear_attention";
        const std::vector<const Matrix*> in_proj = {&g.query, &g.key, &g.value, &g.z, &g.a_projection,
                                                    &g.b_projection};
        if (up.tiled() && one_format(in_proj)) {
            d.gdn.in_proj = up.pieces(whole(in_proj), q + "/query+key+value+z+a+b", true);
        } else {
            // Pairs of one format are one launch each (their rows land side by side in the
            // runner's buffers: [q; k; v] then z, a then b).
            const bool qkv = one_format({&g.query, &g.key, &g.value});
            const bool qk = !qkv && up.tiled() && one_format({&g.query, &g.key});
            const bool vz = !qkv && up.tiled() && one_format({&g.value, &g.z});
            if (qkv)
                d.gdn.qkv = up.pieces(whole({&g.query, &g.key, &g.value}), q + "/query+key+value", true);
            if (qk)
                d.gdn.qk = up.pieces(whole({&g.query, &g.key}), q + "/query+key", true);
            else if (!qkv)
                d.gdn.query = up.linear(g.query, q + "/query"), d.gdn.key = up.linear(g.key, q + "/key");
            if (vz) {
                d.gdn.vz = up.pieces(whole({&g.value, &g.z}), q + "/value+z", true);
            } else {
                if (!qkv)
                    d.gdn.value = up.linear(g.value, q + "/value");
                d.gdn.z = up.linear(g.z, q + "/z");
            }
            if (up.tiled() && one_format({&g.a_projection, &g.b_projection})) {
                d.gdn.ab = up.pieces(whole({&g.a_projection, &g.b_projection}), q + "/a+b", true);
            } else {
                d.gdn.a = up.linear(g.a_projection, q + "/a");
                d.gdn.b = up.linear(g.b_projection, q + "/b");
            }
        }
        d.gdn.output = up.linear(g.output, q + "/output");
        // Taps: tap-major [kernel][conv_dim] f32 -> [conv_dim][kernel] bf16 (the kernel's layout).
        const uint32_t K = c.linear_conv_kernel_dim, cd = c.gdn_conv_dim();
        std::vector<float> taps(size_t(K) * cd);
        for (uint32_t j = 0; j < K; ++j)
            for (uint32_t ch = 0; ch < cd; ++ch)
                taps[size_t(ch) * K + j] = g.convolution[size_t(j) * cd + ch];
        d.gdn.conv = up.bf16(taps, q + "/convolution");
        if (up.f32_vectors())
            d.gdn.conv_f32 = up.f32(taps, q + "/convolution (f32)");
        d.gdn.a_log = up.f32(g.a_log, q + "/a_log");
        d.gdn.dt_bias = up.f32(g.dt_bias, q + "/dt_bias");
        d.gdn.norm = up.bf16(g.norm, q + "/norm");
        if (up.f32_vectors())
            d.gdn.norm_f32 = up.f32(g.norm, q + "/norm (f32)");
    }
    if (c.is_moe()) {
        const MoeWeights& e = L.moe;
        d.moe.router = up.f32x(e.router, p + "/moe/router");
        d.moe.shared_score = up.f32x(e.shared_score, p + "/moe/shared_score");
        d.moe.shared = upload_mlp(up, e.shared, p + "/moe/shared", false);
        std::vector<RowPiece> gate_up, down;
        for (const MlpWeights& x : e.experts) {
            gate_up.push_back({&x.gate, 0, x.gate.rows()});
            gate_up.push_back({&x.up, 0, x.up.rows()});
            down.push_back({&x.down, 0, x.down.rows()});
        }
        d.moe.experts_gate_up = up.pieces(gate_up, p + "/moe/experts/gate+up", false);
        d.moe.experts_down = up.pieces(down, p + "/moe/experts/down", false);
    } else {
        d.mlp = upload_mlp(up, L.mlp, p + "/mlp", true);
    }
    return d;
}

} // namespace

void cuda_check(int err, const std::string& what) {
    if (err != cudaSuccess)
        throw Error("cuda: " + what + ": " + cudaGetErrorString(cudaError_t(err)));
}

DeviceArena::~DeviceArena() {
    for (void* p : blocks_)
        cudaFree(p);
}

void* DeviceArena::alloc(uint64_t bytes, const std::string& what) {
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, std::max<uint64_t>(bytes, 256));
    if (err != cudaSuccess)
        throw Error("cuda: out of GPU memory allocating " + std::to_string(bytes) + " bytes for " + what + " (" +
                    cudaGetErrorString(err) + ")");
    blocks_.push_back(p);
    bytes_ += bytes;
    return p;
}

DeviceModel DeviceModel::upload(const ModelWeights& w, DeviceArena& arena, bool tiled, bool with_mtp,
                                bool f32_vectors) {
    const ModelConfig& c = w.config;
    DeviceModel m;
    Uploader up(arena, m, tiled, f32_vectors);
    m.embedding = up.linear(w.token_embedding, "text/token_embedding", false);
    m.output_head = up.linear(w.output_head, "text/output_head");
    m.final_norm = up.f32(w.final_norm, "text/final_norm");
    for (uint32_t l = 0; l < c.num_hidden_layers; ++l)
        m.layers.push_back(upload_layer(up, c, w.layers[l], "text/layers/" + std::to_string(l)));
    if (with_mtp) {
        if (!w.mtp)
            throw Error("cuda: the plan counts an MTP layer but the weights have no MTP head");
        DeviceMtp& h = m.mtp.emplace();
        h.input_projection = up.linear(w.mtp->input_projection, "mtp/input_projection");
        h.embedding_norm = up.f32(w.mtp->embedding_norm, "mtp/embedding_norm");
        h.hidden_norm = up.f32(w.mtp->hidden_norm, "mtp/hidden_norm");
        h.final_norm = up.f32(w.mtp->final_norm, "mtp/final_norm");
        h.layer = upload_layer(up, c, w.mtp->layer, "mtp/layers/0");
    }
    return m;
}

} // namespace ninfer::core::cuda
