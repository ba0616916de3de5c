// ninfer::core - a multimodal prefill chunk's vision rows and M-RoPE positions onto the GPU.
#include "core/cuda/multimodal_rows.h"

#include "core/cuda/device_weights.h"

#include <vector>

namespace ninfer::core::cuda {

PrefillInputs inputs_part(const PrefillInputs& in, size_t at, size_t n) {
    return {in.positions.subspan(at, n), in.embedding_rows.subspan(at, n), in.embeddings};
}

void enqueue_embedding_rows(const PrefillInputs& in, uint32_t hidden, float* x, int64_t x_stride, cudaStream_t stream) {
    const size_t n = in.embedding_rows.size(), H = hidden;
    for (size_t i = 0; i < n;) {
        if (in.embedding_rows[i] < 0) {
            ++i;
            continue;
        }
        size_t end = i + 1; // a run of tokens taking consecutive rows: one copy
        while (end < n && in.embedding_rows[end] == in.embedding_rows[end - 1] + 1)
            ++end;
        cuda_check(cudaMemcpy2DAsync(x + int64_t(i) * x_stride, size_t(x_stride) * sizeof(float),
                                     in.embeddings.data() + size_t(in.embedding_rows[i]) * H, H * sizeof(float),
                                     H * sizeof(float), end - i, cudaMemcpyHostToDevice, stream),
                   "vision rows");
        i = end;
    }
}

void enqueue_rope_positions(std::span<const MropePosition> positions, int32_t* dst, cudaStream_t stream) {
    if (positions.empty()) return;
    std::vector<int32_t> thw;
    thw.reserve(positions.size() * 3);
    for (const MropePosition& p : positions) {
        thw.push_back(int32_t(p.t));
        thw.push_back(int32_t(p.h));
        thw.push_back(int32_t(p.w));
    }
    cuda_check(cudaMemcpyAsync(dst, thw.data(), thw.size() * sizeof(int32_t), cudaMemcpyHostToDevice, stream),
               "M-RoPE positions");
}

} // namespace ninfer::core::cuda
