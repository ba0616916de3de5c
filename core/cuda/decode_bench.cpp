// ninfer::core - CUDA decode/prefill bench over synthetic weights of the real shapes (issue 9 §4).
#include "core/cuda/decode_bench.h"

#include "core/cuda/tc_peak.h"

#include "core/convert/synthetic.h"
#include "core/cuda/cuda_backend.h"
#include "core/cuda/device_weights.h"
#include "core/formats/format.h"
#include "core/model/memory_plan.h"
#include "core/util/error.h"
#include "ninfer/kernels/probe.h"

#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

namespace ninfer::core {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void fill_small_random(uint8_t* p, uint64_t n, uint64_t seed) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (uint64_t i = 0; i < n; i += 8) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        for (uint64_t j = 0; j < 8 && i + j < n; ++j)
            p[i + j] = uint8_t(((s >> (8 * j)) & 0xff) % 0x3c);
    }
}

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// "mix": the upstream groupwise-int assignment (docs/ARTIFACT_FORMAT.md §4.1; the converter's q4
// recipe).
TensorFormat mix_format(const std::string& name) {
    if (ends_with(name, "token_embedding") || ends_with(name, "output_head")) return TensorFormat::Q6G64Fp16;
    if (contains(name, "a_projection") || contains(name, "b_projection") || ends_with(name, "moe/router") ||
        ends_with(name, "shared_score"))
        return TensorFormat::Bf16;
    if (contains(name, "moe/shared/")) return TensorFormat::Q8G32Fp16;
    if (ends_with(name, "attention/gate") || ends_with(name, "/value") || ends_with(name, "/z") ||
        ends_with(name, "/output") || ends_with(name, "/down"))
        return TensorFormat::Q5G64Fp16;
    return TensorFormat::Q4G64Fp16; // query, key, MLP and expert gate/up
}

TensorFormat matrix_format(const std::string& recipe, const std::string& name, const std::vector<uint64_t>& shape) {
    if (recipe == "mix") return mix_format(name);
    if (recipe == "bf16") return TensorFormat::Bf16;
    if (recipe == "fp8") return TensorFormat::Fp8E4m3fnRowBf16;
    if (recipe == "q4") return TensorFormat::Q4G64Fp16;
    if (recipe == "q5") return TensorFormat::Q5G64Fp16;
    if (recipe == "q6") return TensorFormat::Q6G64Fp16;
    if (recipe == "q8") return TensorFormat::Q8G32Fp16;
    if (recipe == "nvfp4") // its shape rule; the small GDN a/b and score rows stay bf16
        return shape[0] % 128 == 0 && shape[1] % 64 == 0 ? TensorFormat::Nvfp4 : TensorFormat::Bf16;
    throw Error("bench: recipe " + recipe + " is not one of bf16, fp8, q4, q5, q6, q8, nvfp4, mix");
}

double copy_bandwidth_gbps() {
    const uint64_t bytes = 4ull << 30;
    void *a = nullptr, *b = nullptr;
    cuda::cuda_check(cudaMalloc(&a, bytes), "bench copy buffer");
    cuda::cuda_check(cudaMalloc(&b, bytes), "bench copy buffer");
    cudaMemset(a, 1, bytes);
    cudaMemset(b, 2, bytes);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
    float best = 1e30f;
    for (int i = 0; i < 10; ++i) {
        cudaEventRecord(e0);
        cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        best = std::min(best, ms);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaFree(a);
    cudaFree(b);
    return 2.0 * double(bytes) / (best * 1e-3) / 1e9;
}

// Matrix bytes one decode step of `batch` lanes reads: all but the embedding; routed experts
// counted by the expected number of distinct experts chosen.
double weight_bytes_per_step(const ModelWeights& w, int batch) {
    const ModelConfig& c = w.config;
    double total = double(w.output_head.stored_bytes());
    const double e = c.num_experts, k = c.num_experts_per_tok;
    const double distinct = c.is_moe() ? e * (1.0 - std::pow(1.0 - k / e, batch)) : 0;
    for (const LayerWeights& L : w.layers) {
        for (const Matrix* m : {&L.attention.query, &L.attention.key, &L.attention.gate, &L.attention.value,
                                &L.attention.output, &L.gdn.query, &L.gdn.key, &L.gdn.value, &L.gdn.z,
                                &L.gdn.a_projection, &L.gdn.b_projection, &L.gdn.output, &L.mlp.gate, &L.mlp.up,
                                &L.mlp.down, &L.moe.router, &L.moe.shared_score, &L.moe.shared.gate,
                                &L.moe.shared.up, &L.moe.shared.down})
            total += double(m->stored_bytes());
        for (const MlpWeights& x : L.moe.experts)
            total += (double(x.gate.stored_bytes()) + x.up.stored_bytes() + x.down.stored_bytes()) * distinct / e;
    }
    return total;
}

// Matrix FLOPs of one prefill token (2 per multiply-add; MoE: router, shared expert and top_k
// experts; not the output head, which prefill applies to the last token only) and the attention
// FLOPs of a causal prompt of `len` tokens from position 0 (QK^T and PV: 4 * head_dim per
// query-key pair, len * (len + 1) / 2 pairs per head and full-attention layer).
double prefill_flops(const ModelConfig& c, uint32_t len) {
    const double H = c.hidden_size;
    double per_token = 0;
    per_token += c.n_full_attention_layers() * H * (2.0 * c.attn_q_dim() + 2.0 * c.attn_kv_dim() + c.attn_q_dim());
    per_token += c.n_linear_attention_layers() * H *
                 (double(c.gdn_conv_dim()) + 2.0 * c.gdn_value_dim() + 2.0 * c.linear_num_value_heads);
    if (c.is_moe())
        per_token += c.num_hidden_layers * H *
                     (double(c.num_experts) + 1 + 3.0 * c.shared_expert_intermediate_size +
                      3.0 * c.num_experts_per_tok * c.moe_intermediate_size);
    else
        per_token += c.num_hidden_layers * H * 3.0 * c.intermediate_size;
    const double pairs = double(len) * (double(len) + 1) / 2;
    return 2.0 * per_token * len +
           4.0 * c.head_dim * c.num_attention_heads * pairs * c.n_full_attention_layers();
}

} // namespace

std::unique_ptr<SyntheticWeights> synthetic_device_weights(const std::string& shape, const std::string& recipe,
                                                           uint64_t seed, uint32_t layers, bool with_mtp) {
    ModelConfig c = synthetic_shape_config(shape);
    c.vocab_size = 248320;
    if (layers > 0 && layers < c.num_hidden_layers) {
        c.num_hidden_layers = layers;
        if (c.layer_types.size() > layers) c.layer_types.resize(layers);
    }
    matrix_format(recipe, "", {128, 64}); // an unknown recipe fails before the buffers are made
    auto sw = std::make_unique<SyntheticWeights>();
    std::vector<ParameterSpec> specs = text_parameter_specs(c);
    if (with_mtp)
        for (ParameterSpec& s : mtp_parameter_specs(c))
            specs.push_back(std::move(s));
    sw->tensors.reserve(specs.size());
    uint64_t max_bytes = 0;
    for (const ParameterSpec& s : specs) {
        StoredTensor t;
        t.id = s.name;
        t.shape = s.shape;
        t.format = ends_with(s.name, "a_log") || ends_with(s.name, "dt_bias") ? TensorFormat::Fp32
                   : (s.shape.size() == 1 || ends_with(s.name, "convolution")) ? TensorFormat::Bf16
                                                                               : matrix_format(recipe, s.name, s.shape);
        t.bytes = encoded_size(t.format, t.shape);
        max_bytes = std::max(max_bytes, t.bytes);
        sw->tensors.push_back(std::move(t));
    }
    sw->bytes.resize(max_bytes);
    fill_small_random(sw->bytes.data(), max_bytes, seed);
    std::map<std::string, WeightBinding> bindings;
    for (StoredTensor& t : sw->tensors) {
        t.data = sw->bytes.data();
        uint64_t elems = 1;
        for (uint64_t d : t.shape) elems *= d;
        bindings[t.id] = WeightBinding{t.id, t.shape, {WeightPiece{&t, 0, elems}}};
    }
    sw->weights = ModelWeights::from_bindings(c, bindings);
    return sw;
}

DecodeBenchReport run_decode_bench(const DecodeBenchRequest& r) {
    const std::string why = cuda_unavailable_reason();
    if (!why.empty())
        throw Error("bench: --device cuda is unavailable: " + why);
    DecodeBenchReport rep;
    rep.copy_gbps = copy_bandwidth_gbps();
    rep.tc_peak = measure_bf16_peak();
    std::unique_ptr<SyntheticWeights> sw;
    if (!r.weights)
        sw = synthetic_device_weights(r.shape, r.recipe, 1, 0, r.spec_mtp);
    const ModelWeights& w = r.weights ? *r.weights : sw->weights;
    rep.weight_bytes = w.stored_bytes();
    rep.prefill_chunk = r.prefill_chunk;
    const int lanes = *std::max_element(r.batches.begin(), r.batches.end());
    const uint32_t depth_max = *std::max_element(r.prompt_lens.begin(), r.prompt_lens.end());
    MemoryRequest mr;
    // Whole pages per lane, so that every lane can hold max_context tokens at once.
    // Speculative rounds: a warm-up and `steps` rounds of up to spec_k + 1 tokens, after one step.
    const uint32_t spec_tokens = r.spec_k > 0 ? uint32_t(r.steps + 2) * uint32_t(r.spec_k + 1) : 0;
    mr.max_context = (depth_max + std::max(uint32_t(r.steps), spec_tokens) + 8 + 63) / 64 * 64;
    mr.max_concurrency = lanes;
    mr.kv_capacity_tokens = uint64_t(lanes) * mr.max_context;
    mr.weight_bytes = rep.weight_bytes;
    mr.available_bytes = cuda_free_bytes();
    mr.margin_bytes = 2ull << 30;
    mr.prefill_chunk = r.prefill_chunk;
    mr.max_draft_tokens = uint32_t(std::max(r.spec_k, 0));
    mr.mtp = r.spec_mtp;
    if (r.spec_mtp && !w.mtp)
        throw Error("bench: --speculative mtp:K needs an artifact with an MTP head (convert it with the mtp component)");
    mr.backend_workspace_bytes = cuda_backend_workspace_bytes(w.config, mr);
    mr.kv_dtype = r.kv_dtype;
    const MemoryPlan plan = MemoryPlan::make(w.config, mr);
    std::string note;
    const CudaBackendOptions options = cuda_backend_options_from_env(&note);
    if (!note.empty()) std::fprintf(stderr, "%s\n", note.c_str());
    auto b = make_cuda_backend(w, plan, options);

    const uint32_t token_ids = std::min(151000u, w.config.vocab_size); // prompt and first tokens: ids below this
    std::vector<int32_t> prompt(depth_max);
    for (uint32_t i = 0; i < depth_max; ++i) prompt[i] = int32_t((i * 7919u) % token_ids);
    b->prefill(0, std::span(prompt).first(8), LogitsOut::Last, nullptr); // warm-up
    for (uint32_t len : r.prefill ? r.prompt_lens : std::vector<uint32_t>{}) {
        b->reset_lane(0);
        const auto t0 = Clock::now();
        b->prefill(0, std::span(prompt).first(len), LogitsOut::Last, nullptr);
        const double prefill_s = seconds_since(t0);
        b->sample_after_prefill(0, SamplingParams{}, {}, 0);
        PrefillBenchRow row{len, len / prefill_s, seconds_since(t0) * 1e3};
        row.tflops = prefill_flops(w.config, len) / prefill_s / 1e12;
        row.peak_fraction = rep.tc_peak.peak_tflops() > 0 ? row.tflops / rep.tc_peak.peak_tflops() : 0;
        rep.prefill.push_back(row);
    }

    const char* probe_out = std::getenv("NINFER_PROBE_OUT");
    if (probe_out && !kernels::probe_built())
        std::fprintf(stderr, "probe: NINFER_PROBE_OUT is set but this build has no probe (cmake -DNINFER_GPU_PROBE=ON)\n");
    // KV image bytes: the synthetic weights' random bytes, or (an artifact's weights) 16 MiB of them.
    std::vector<uint8_t> kv_noise;
    if (!sw) {
        kv_noise.resize(16u << 20);
        fill_small_random(kv_noise.data(), kv_noise.size(), 1);
    }
    const std::vector<uint8_t>& noise = sw ? sw->bytes : kv_noise;
    for (uint32_t depth : r.prompt_lens) {
        LaneImage img;
        img.tokens.assign(depth, 1);
        img.kv_dtype = plan.kv_dtype;
        std::span<uint8_t> kv = img.add_section(LaneSectionTag::Kv, plan.lane_image_kv_bytes(depth));
        for (uint64_t i = 0; i < kv.size(); i += noise.size())
            std::copy_n(noise.begin(), std::min<uint64_t>(noise.size(), kv.size() - i), kv.begin() + i);
        img.add_section(LaneSectionTag::Gdn, plan.lane_image_gdn_bytes());
        for (int batch : r.batches) {
            for (int l = 0; l < batch; ++l) b->restore_lane(l, img);
            // Every lane holds the same image, so each starts from its own token: with one token for
            // all, the lanes stayed identical and a MoE batch routed every token to the same top_k
            // experts (reading ~8 experts a layer where independent requests read ~57 at batch 8).
            std::vector<DecodeStep> steps(static_cast<size_t>(batch));
            for (int l = 0; l < batch; ++l) {
                steps[size_t(l)].lane = l;
                steps[size_t(l)].token = int32_t((uint32_t(l) * 7919u + 101u) % token_ids);
                steps[size_t(l)].sampling = r.sampling;
                steps[size_t(l)].sampling.seed = uint64_t(l) + 1;
            }
            for (int i = 0; i < 2; ++i) b->decode(steps);
            std::vector<double> step_s;
            for (int s = 0; s < r.steps; ++s) {
                const bool profiled = s + 1 == r.steps; // `ncu --profile-from-start off` sees this step only
                // The step timeline probe (ninfer/kernels/probe.h) records the ninth step; its
                // synchronisations fall outside the timed region.
                const bool probed = s == 8 && probe_out && kernels::probe_built();
                if (probed) kernels::probe_arm(true);
                if (profiled) cudaProfilerStart();
                const auto ts = Clock::now();
                const auto res = b->decode(steps);
                step_s.push_back(seconds_since(ts));
                if (profiled) cudaProfilerStop();
                if (probed) {
                    kernels::probe_arm(false);
                    const std::string path =
                        std::string(probe_out) + "_b" + std::to_string(batch) + "_d" + std::to_string(depth) + ".csv";
                    const int64_t events = kernels::probe_dump(path.c_str());
                    std::fprintf(stderr, "probe: %lld events of one step to %s\n", static_cast<long long>(events),
                                 path.c_str());
                }
                for (int l = 0; l < batch; ++l) {
                    steps[size_t(l)].token = res[size_t(l)].token;
                    steps[size_t(l)].sampling.step = uint64_t(s) + 1;
                }
            }
            DecodeBenchRow row;
            row.batch = batch;
            row.depth = depth;
            row.steps = r.steps;
            // The median step, not the mean: one slow step (a clock change, another process's work on
            // the GPU) must not move the figure; min and max show the spread.
            std::sort(step_s.begin(), step_s.end());
            const size_t n = step_s.size();
            const double median_s = n % 2 ? step_s[n / 2] : 0.5 * (step_s[n / 2 - 1] + step_s[n / 2]);
            row.step_ms = median_s * 1e3;
            row.min_step_ms = step_s.front() * 1e3;
            row.max_step_ms = step_s.back() * 1e3;
            row.tokens_per_s = batch / median_s;
            row.bytes_per_step = weight_bytes_per_step(w, batch) + double(batch) * depth * plan.kv_bytes_per_token +
                                 2.0 * batch * plan.gdn_recurrent_bytes_per_lane;
            row.roofline_fraction = row.bytes_per_step / (row.step_ms * 1e-3) / (rep.copy_gbps * 1e9);
            rep.rows.push_back(row);
            if (r.spec_k > 0)
                bench_speculative_rounds(*b, {r.spec_k, r.spec_mtp, batch, depth, r.steps, token_ids, &img, row.step_ms},
                                         rep.spec_rows);
        }
    }
    for (SpecBenchRow& s : rep.spec_rows) // the floor: a plain step of batch x (K + 1) lanes, if measured
        for (const DecodeBenchRow& d : rep.rows)
            if (d.depth == s.depth && d.batch == s.batch * (s.k + 1)) s.floor_ms = d.step_ms;
    return rep;
}

std::string DecodeBenchReport::text() const {
    char line[256];
    std::string s;
    std::snprintf(line, sizeof line, "copy bandwidth (D2D 4 GiB, best of 10, read+write): %.0f GB/s\n", copy_gbps);
    s += line;
    std::snprintf(line, sizeof line, "weights on GPU: %.2f GiB\n", double(weight_bytes) / (1ull << 30));
    s += line;
    std::snprintf(line, sizeof line, "bf16 tensor-core peak (%d^3 GEMM, median of 10): ours %.1f TFLOP/s, cuBLASLt %s\n",
                  tc_peak.size, tc_peak.ours_tflops,
                  tc_peak.cublaslt_tflops > 0 ? (std::to_string(int(tc_peak.cublaslt_tflops + 0.5)) + " TFLOP/s").c_str()
                                              : ("n/a (" + tc_peak.cublaslt_note + ")").c_str());
    s += line;
    for (const PrefillBenchRow& p : prefill) {
        std::snprintf(line, sizeof line,
                      "prefill %u tokens (chunks of %u): %.1f tok/s, TTFT %.1f ms, %.1f TFLOP/s, %.1f%% of the bf16 "
                      "tensor-core peak\n",
                      p.prompt_len, prefill_chunk, p.tokens_per_s, p.ttft_ms, p.tflops, 100.0 * p.peak_fraction);
        s += line;
    }
    for (const DecodeBenchRow& r : rows) {
        std::snprintf(line, sizeof line,
                      "decode batch %d depth %u: %.3f ms/step, %.1f tok/s, %.2f GB/step, %.1f%% of roofline "
                      "(median of %d steps; min %.3f, max %.3f ms)\n",
                      r.batch, r.depth, r.step_ms, r.tokens_per_s, r.bytes_per_step / 1e9,
                      100.0 * r.roofline_fraction, r.steps, r.min_step_ms, r.max_step_ms);
        s += line;
    }
    for (const SpecBenchRow& r : spec_rows) s += spec_bench_row_text(r);
    return s;
}

} // namespace ninfer::core
