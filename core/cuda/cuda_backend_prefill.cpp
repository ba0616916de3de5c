// ninfer::core - CudaBackend's prefill (cuda_backend_impl.h): chunks, multimodal rows, layer slices.
#include "core/cuda/cuda_backend_impl.h"

#include "core/cuda/multimodal_rows.h"
#include "core/util/error.h"

#include <algorithm>

namespace ninfer::core::cuda_detail {
namespace {

// Chunks shorter than this run the decode kernels 8 tokens at a time: below it, dequantising every
// weight to bf16 for the GEMMs costs more than reading the stored weights once per 8 tokens.
constexpr size_t kMinGemmPrefillTokens = 16;

} // namespace

void CudaBackend::prefill(int lane, std::span<const int32_t> tokens, LogitsOut out, std::vector<float>* logits) {
    prefill_rows(lane, tokens, nullptr, out, logits);
}

void CudaBackend::prefill_with(int lane, std::span<const int32_t> tokens, const PrefillInputs& in, LogitsOut out,
                               std::vector<float>* logits) {
    check_prefill_inputs(tokens.size(), in, run_.config().hidden_size);
    const int64_t before = int64_t(at(lane).tokens.size()) + at(lane).rope_offset;
    prefill_rows(lane, tokens, &in, out, logits);
    set_lane_rope_offset(lane, next_text_position(in, before) - int64_t(at(lane).tokens.size()));
}

void CudaBackend::prefill_rows(int lane, std::span<const int32_t> tokens, const PrefillInputs* mm, LogitsOut out,
                               std::vector<float>* logits) {
    const uint32_t start = prefill_start(lane, tokens, out, logits);
    if (prefill_ && tokens.size() >= kMinGemmPrefillTokens)
        prefill_chunks(lane, start, tokens, mm, out, logits);
    else
        prefill_blocks(lane, start, tokens, mm, out, logits);
    prefill_done(lane, tokens, out, logits);
}

uint32_t CudaBackend::prefill_start(int lane, std::span<const int32_t> tokens, LogitsOut out,
                                    std::vector<float>* logits) {
    Lane& s = at(lane);
    if (tokens.empty())
        throw Error("backend: prefill with no tokens");
    if (sliced_)
        throw Error("backend: a prefill while a sliced prefill is pending");
    check_tokens(tokens);
    windows_.close(lane);
    const uint32_t start = uint32_t(s.tokens.size());
    grow(lane, tokens.size());
    if (out == LogitsOut::All && logits)
        logits->resize(tokens.size() * size_t(vocab_size()));
    return start;
}

void CudaBackend::prefill_done(int lane, std::span<const int32_t> tokens, LogitsOut out, std::vector<float>* logits) {
    Lane& s = at(lane);
    s.tokens.insert(s.tokens.end(), tokens.begin(), tokens.end());
    s.has_logits = out != LogitsOut::None;
    if (out == LogitsOut::Last && logits)
        *logits = last_logits(lane);
    cuda_check(cudaStreamSynchronize(run_.stream()), "prefill");
}

void CudaBackend::prefill_begin(int lane, std::span<const int32_t> tokens, LogitsOut out,
                                std::vector<float>* logits) {
    if (!prefill_ || out == LogitsOut::All || tokens.size() < kMinGemmPrefillTokens ||
        tokens.size() > size_t(prefill_->max_tokens()))
        return Backend::prefill_begin(lane, tokens, out, logits);
    const uint32_t start = prefill_start(lane, tokens, out, logits);
    sliced_ = SlicedChunk{lane, start, std::vector<int32_t>(tokens.begin(), tokens.end()), out, logits};
    prefill_->enqueue_begin(lane, start, sliced_->tokens);
}

bool CudaBackend::prefill_advance(int max_layers) {
    if (!sliced_)
        return Backend::prefill_advance(max_layers);
    if (prefill_->enqueue_layers(max_layers > 0 ? max_layers : int(run_.config().num_hidden_layers)) > 0)
        return false;
    const SlicedChunk c = std::move(*sliced_);
    sliced_.reset();
    prefill_->enqueue_end();
    chunk_outputs(c.lane, c.start, c.tokens, 0, int(c.tokens.size()), true, c.out, c.logits);
    prefill_done(c.lane, c.tokens, c.out, c.logits);
    return true;
}

void CudaBackend::prefill_chunks(int lane, uint32_t start, std::span<const int32_t> tokens, const PrefillInputs* mm,
                                 LogitsOut out, std::vector<float>* logits) {
    for (size_t b = 0; b < tokens.size(); b += size_t(prefill_->max_tokens())) {
        const int n = int(std::min<size_t>(size_t(prefill_->max_tokens()), tokens.size() - b));
        const PrefillInputs part = mm ? cuda::inputs_part(*mm, b, size_t(n)) : PrefillInputs{};
        prefill_->enqueue_forward(lane, start + uint32_t(b), tokens.subspan(b, size_t(n)), mm ? &part : nullptr);
        chunk_outputs(lane, start, tokens, b, n, b + size_t(n) == tokens.size(), out, logits, mm ? &part : nullptr);
    }
}

void CudaBackend::chunk_outputs(int lane, uint32_t start, std::span<const int32_t> tokens, size_t b, int n, bool last,
                                LogitsOut out, std::vector<float>* logits, const PrefillInputs* mm) {
    if (out == LogitsOut::All) {
        for (int r = 0; r < n; r += kMaxStepTokens) {
            const int rows = std::min(kMaxStepTokens, n - r);
            prefill_->stage_rows(r, rows);
            take_logits(lane, 0, rows, b + size_t(r), last && r + rows == n, out, logits);
        }
    } else if (out == LogitsOut::Last && last) {
        prefill_->stage_rows(n - 1, 1);
        take_logits(lane, 0, 1, b + size_t(n - 1), true, out, logits);
    }
    if (mtp_) // after the logits: the head reuses the runner's step rows
        mtp_->take_prefill(lane, at(lane).tokens, tokens, start + uint32_t(b), n, prefill_->final_rows_f32(),
                           prefill_->row_stride(), prefill_.get(), mm);
}

void CudaBackend::prefill_blocks(int lane, uint32_t start, std::span<const int32_t> tokens, const PrefillInputs* mm,
                                 LogitsOut out, std::vector<float>* logits) {
    for (size_t b = 0; b < tokens.size(); b += kMaxStepTokens) {
        const int n = int(std::min<size_t>(kMaxStepTokens, tokens.size() - b));
        std::vector<int32_t> in(3 * kMaxStepTokens, 0);
        for (int i = 0; i < n; ++i) {
            in[i] = tokens[b + i];
            in[kMaxStepTokens + i] = lane;
            in[2 * kMaxStepTokens + i] = int32_t(start + b + i);
        }
        upload_step(in);
        const PrefillInputs part = mm ? cuda::inputs_part(*mm, b, size_t(n)) : PrefillInputs{};
        run_.enqueue_forward(n, true, mm ? &part : nullptr);
        take_logits(lane, 0, n, b, b + n == tokens.size(), out, logits);
        if (mtp_)
            mtp_->take_prefill(lane, at(lane).tokens, tokens, start + uint32_t(b), n, nullptr, 0, nullptr,
                               mm ? &part : nullptr);
    }
}

void CudaBackend::take_logits(int lane, int row, int n, size_t first_token, bool last, LogitsOut out,
                              std::vector<float>* logits) {
    const uint32_t V = vocab_size();
    if (out == LogitsOut::All) {
        run_.enqueue_head(row, n);
        if (logits)
            cuda_check(cudaMemcpy2DAsync(logits->data() + first_token * V, V * 4, run_.logits(),
                                         run_.logits_stride() * 4, V * 4, n, cudaMemcpyDeviceToHost,
                                         run_.stream()), "reading logits");
        if (last)
            keep_lane_logits(lane, n - 1);
    } else if (out == LogitsOut::Last && last) {
        run_.enqueue_head(row + n - 1, 1);
        keep_lane_logits(lane, 0);
    }
}

void CudaBackend::upload_step(const std::vector<int32_t>& in) {
    cuda_check(cudaMemcpyAsync(run_.step_in(), in.data(), in.size() * 4, cudaMemcpyHostToDevice, run_.stream()),
               "step inputs");
    cuda_check(cudaStreamSynchronize(run_.stream()), "step inputs");
}

void CudaBackend::keep_lane_logits(int lane, int row) {
    cuda_check(cudaMemcpyAsync(run_.lane_logits() + lane * run_.logits_stride(),
                               run_.logits() + row * run_.logits_stride(), vocab_size() * 4,
                               cudaMemcpyDeviceToDevice, run_.stream()), "lane logits");
}

} // namespace ninfer::core::cuda_detail
