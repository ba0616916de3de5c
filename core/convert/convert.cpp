// ninfer::core - HF checkpoint -> artifact: layout detection, source checks, chunked encoding.
#include "core/convert/convert.h"

#include "core/convert/hf_source.h"
#include "core/convert/plan.h"
#include "core/convert/row_chunks.h"
#include "core/convert/safetensors.h"
#include "core/formats/codec.h"
#include "core/formats/format.h"
#include "core/formats/layout.h"
#include "core/util/error.h"
#include "core/util/json_writer.h"

#include <cmath>
#include <cstring>
#include <filesystem>

namespace ninfer::core {
namespace {

// f32 elements per encoding chunk: 16 MiB of floats, small next to any object worth streaming.
constexpr uint64_t kChunkElements = 4ull << 20;
constexpr uint64_t kCopySliceBytes = 16ull << 20;

std::string shape_text(const std::vector<uint64_t>& s) {
    std::string t = "[";
    for (size_t i = 0; i < s.size(); ++i)
        t += (i ? "," : "") + std::to_string(s[i]);
    return t + "]";
}

struct ResolvedSource {
    const SafetensorsTensor* tensor;
    uint64_t row_begin, row_end;
    uint64_t object_row; // first object row this source fills
};

class Converter {
  public:
    Converter(const SafetensorsCheckpoint& ckpt) : ckpt_(ckpt) {}

    // Every source of every object: present, of the expected shape, of a readable dtype.
    void check_sources(const std::vector<PlannedObject>& plan) const {
        for (const PlannedObject& o : plan)
            for (const SourceRows& s : o.sources) {
                const SafetensorsTensor* t = ckpt_.find(s.key);
                if (!t)
                    throw Error("convert: the checkpoint lacks tensor " + s.key + " (needed for " + o.id + ")");
                if (t->shape != s.shape)
                    throw Error("convert: tensor " + s.key + " has shape " + shape_text(t->shape) +
                                "; config.json implies " + shape_text(s.shape));
                if (source_dtype_bytes(t->dtype) == 0)
                    throw Error("convert: tensor " + s.key + " has dtype " + t->dtype_name +
                                "; the converter reads BF16, F16 and F32");
            }
    }

    // Streams the object's encoding to `sink` in bands of rows, so no whole encoded object (nor a
    // whole f32 copy of its source) is ever held.
    void produce(const PlannedObject& o, TensorFormat f, const ObjectSink& sink) {
        std::vector<ResolvedSource> sources;
        uint64_t row = 0;
        bool all_bf16 = true;
        for (const SourceRows& s : o.sources) {
            const SafetensorsTensor* t = ckpt_.find(s.key);
            sources.push_back({t, s.row_begin, s.row_end, row});
            row += s.row_end - s.row_begin;
            all_bf16 = all_bf16 && t->dtype == SourceDtype::Bf16;
        }
        if (o.transpose_taps)
            produce_transposed(o, f, sources[0], sink);
        else if (f == TensorFormat::Bf16 && all_bf16)
            copy_bf16(o, sources, sink);
        else
            produce_chunked(o, f, sources, sink);
        for (const ResolvedSource& s : sources)
            ckpt_.release(*s.tensor);
    }

  private:
    void copy_bf16(const PlannedObject& o, const std::vector<ResolvedSource>& sources, const ObjectSink& sink) {
        const uint64_t row_bytes = o.cols() * 2;
        for (const ResolvedSource& s : sources) {
            // Hand the mapped source straight to the writer in slices and drop each slice's pages
            // at once, so a big tensor is never resident.
            const uint64_t begin = s.row_begin * row_bytes, end = s.row_end * row_bytes;
            for (uint64_t b = begin; b < end; b += kCopySliceBytes) {
                uint64_t n = std::min(kCopySliceBytes, end - b);
                sink(s.object_row * row_bytes + (b - begin), std::span<const uint8_t>(s.tensor->data + b, n));
                ckpt_.release_bytes(*s.tensor, b, b + n);
            }
        }
    }

    // Rows [r0, r0+n) of the object as f32, gathered from the sources that cover them.
    void gather(const PlannedObject& o, const std::vector<ResolvedSource>& sources, uint64_t r0, uint64_t n,
                float* dst) {
        const uint64_t cols = o.cols();
        for (const ResolvedSource& s : sources) {
            uint64_t s_end = s.object_row + (s.row_end - s.row_begin);
            uint64_t a = std::max(r0, s.object_row), b = std::min(r0 + n, s_end);
            if (a >= b)
                continue;
            uint64_t first = s.row_begin + (a - s.object_row);
            ckpt_.read_rows_f32(*s.tensor, cols, first, b - a, dst + (a - r0) * cols);
            uint64_t word = source_dtype_bytes(s.tensor->dtype);
            ckpt_.release_bytes(*s.tensor, first * cols * word, (first + b - a) * cols * word);
        }
    }

    void produce_transposed(const PlannedObject& o, TensorFormat f, const ResolvedSource& s,
                            const ObjectSink& sink) {
        // Checkpoint conv1d.weight [C,1,taps] -> object [taps, C], tap-major (small: one piece).
        const uint64_t taps = o.shape[0], channels = o.shape[1];
        std::vector<float> src(taps * channels), values(taps * channels);
        ckpt_.read_rows_f32(*s.tensor, taps, 0, channels, src.data());
        for (uint64_t c = 0; c < channels; ++c)
            for (uint64_t t = 0; t < taps; ++t)
                values[t * channels + c] = src[c * taps + t];
        sink(0, encode(f, o.shape, values));
    }

    void produce_chunked(const PlannedObject& o, TensorFormat f, const std::vector<ResolvedSource>& sources,
                         const ObjectSink& sink) {
        const uint64_t rows = o.rows(), cols = o.cols();
        uint64_t step = std::max<uint64_t>(1, kChunkElements / cols);
        float amax = 0.0f;
        if (f == TensorFormat::Nvfp4) {
            // The divisor covers the whole matrix: a first pass finds max |x|; bands are whole
            // 128-row tiles of the swizzled scale plane.
            step = std::max<uint64_t>(128, step / 128 * 128);
            buffer_.resize(std::min(step, rows) * cols);
            for (uint64_t r0 = 0; r0 < rows; r0 += step) {
                uint64_t n = std::min(step, rows - r0);
                gather(o, sources, r0, n, buffer_.data());
                for (uint64_t i = 0; i < n * cols; ++i)
                    amax = std::max(amax, std::fabs(buffer_[i]));
            }
        }
        buffer_.resize(std::min(step, rows) * cols);
        for (uint64_t r0 = 0; r0 < rows; r0 += step) {
            uint64_t n = std::min(step, rows - r0);
            gather(o, sources, r0, n, buffer_.data());
            if (n == rows) // one band: the object's own shape (any rank)
                sink(0, encode(f, o.shape, std::span<const float>(buffer_.data(), n * cols)));
            else
                write_row_chunk(f, rows, cols, r0, n, std::span<const float>(buffer_.data(), n * cols), amax, sink);
        }
        if (rows > step)
            write_plane_padding(f, rows, cols, sink);
        if (buffer_.size() > kChunkElements)
            buffer_ = {};
    }

    const SafetensorsCheckpoint& ckpt_;
    std::vector<float> buffer_;
};

CheckpointNaming detect_naming(const SafetensorsCheckpoint& ckpt, const HfSource& src) {
    CheckpointNaming n;
    if (ckpt.find("model.language_model.embed_tokens.weight"))
        n.text_prefix = "model.language_model.";
    else if (ckpt.find("model.embed_tokens.weight"))
        n.text_prefix = "model.";
    else
        throw Error("convert: the checkpoint has neither model.embed_tokens.weight nor "
                    "model.language_model.embed_tokens.weight");
    if (!ckpt.find(n.output_head_key) && src.config.tie_word_embeddings)
        n.output_head_key = n.text_prefix + "embed_tokens.weight";
    if (src.config.is_moe()) {
        // Fused experts are detected on the first layer; the source check then holds every layer
        // to the same layout.
        n.fused_experts = ckpt.find(n.text_prefix + "layers.0.mlp.experts.gate_up_proj") != nullptr;
    }
    return n;
}

} // namespace

uint64_t convert_checkpoint(const ConvertRequest& req) {
    HfSource src = read_hf_source(req.src_dir, req.tokenizer_file);
    std::unique_ptr<SafetensorsCheckpoint> ckpt = SafetensorsCheckpoint::open_dir(req.src_dir);

    PlanOptions options;
    options.naming = detect_naming(*ckpt, src);
    const bool has_mtp = ckpt->find("mtp.fc.weight") != nullptr;
    const bool has_vision =
        src.has_vision_config && ckpt->find(options.naming.vision_prefix + "patch_embed.proj.weight");
    if (req.mtp == ComponentChoice::Include && !has_mtp)
        throw Error("convert: --components mtp: the checkpoint has no mtp.* tensors (mtp.fc.weight)");
    if (req.vision == ComponentChoice::Include && !src.has_vision_config)
        throw Error("convert: --components vision: config.json of " + src.architecture +
                    " has no vision_config");
    options.with_mtp = req.mtp == ComponentChoice::Include || (req.mtp == ComponentChoice::Auto && has_mtp);
    options.with_vision = req.vision == ComponentChoice::Include ||
                          (req.vision == ComponentChoice::Auto && has_vision);
    if (options.with_vision)
        options.vision = src.vision;
    const std::vector<PlannedObject> plan = plan_objects(src.config, options);
    check_plan_formats(plan, req.recipe);
    Converter converter(*ckpt);
    converter.check_sources(plan);

    EmitRequest e;
    e.out_path = req.out_path;
    e.force = req.force;
    e.config = &src.config;
    e.plan = &plan;
    e.recipe = &req.recipe;
    e.text_resources = src.resources;
    e.with_mtp = options.with_mtp;
    e.with_vision = options.with_vision;
    e.vision_config_json = src.vision.config_json;
    e.vision_resources = src.vision_resources;
    e.name = req.name.empty() ? std::filesystem::path(req.out_path).stem().string() : req.name;
    e.synthetic = false;
    std::error_code ec;
    std::string abs = std::filesystem::absolute(req.src_dir, ec).string();
    e.provenance_json = "{\"source\":" + json_quote(ec ? req.src_dir : abs) +
                        ",\"architecture\":" + json_quote(src.architecture) +
                        ",\"recipe\":" + json_quote(req.recipe.name) +
                        ",\"formats\":" + req.recipe.overrides_json() + "}";
    e.produce_stream = [&](const PlannedObject& o, TensorFormat f, const ObjectSink& sink) {
        converter.produce(o, f, sink);
    };
    e.progress = req.progress;
    return emit_artifact(e);
}

} // namespace ninfer::core
