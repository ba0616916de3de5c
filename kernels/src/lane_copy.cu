// ninfer::kernels - KV rows between pool pages and the lane-image layout (lane_copy.h).
#include "ninfer/kernels/lane_copy.h"

namespace ninfer::kernels {

namespace {

constexpr int kKvPageTokens = 64;
constexpr int kWarpsPerBlock = 8;

// One warp per (position, head) row; words of W bytes (the widest that divides every size and
// address involved, so the copy is exact for any row size).
template <class Word, bool kGather>
__global__ void kv_rows_kernel(uint8_t* pool, const int32_t* __restrict__ pages, int pos0, int n_rows, int nkv,
                               int code_words, int scale_words, uint64_t page_bytes, uint8_t* image) {
    const int row = blockIdx.x * kWarpsPerBlock + int(threadIdx.x / 32);
    if (row >= n_rows)
        return;
    const int lane = int(threadIdx.x % 32);
    const int pos = pos0 + row / nkv, h = row % nkv;
    const uint64_t page_row = uint64_t(h) * kKvPageTokens + uint64_t(pos % kKvPageTokens);
    uint8_t* page = pool + uint64_t(pages[pos / kKvPageTokens]) * page_bytes;
    Word* codes = reinterpret_cast<Word*>(page) + page_row * uint64_t(code_words);
    Word* scales = reinterpret_cast<Word*>(page) + uint64_t(nkv) * kKvPageTokens * uint64_t(code_words) +
                   page_row * uint64_t(scale_words);
    Word* out = reinterpret_cast<Word*>(image) + uint64_t(row) * uint64_t(code_words + scale_words);
    for (int i = lane; i < code_words; i += 32) {
        if (kGather)
            out[i] = codes[i];
        else
            codes[i] = out[i];
    }
    for (int i = lane; i < scale_words; i += 32) {
        if (kGather)
            out[code_words + i] = scales[i];
        else
            scales[i] = out[code_words + i];
    }
}

int word_bytes(const KvRowGeometry& g, const void* pool, const void* image) {
    const uint64_t sizes[] = {uint64_t(g.code_bytes), uint64_t(g.scale_bytes), g.page_bytes,
                              uint64_t(reinterpret_cast<uintptr_t>(pool)), uint64_t(reinterpret_cast<uintptr_t>(image))};
    for (int w = 16; w > 1; w /= 2) {
        bool ok = true;
        for (uint64_t s : sizes)
            ok = ok && s % uint64_t(w) == 0;
        if (ok)
            return w;
    }
    return 1;
}

template <bool kGather>
cudaError_t launch(uint8_t* pool, const int32_t* pages, int pos0, int n_pos, const KvRowGeometry& g, uint8_t* image,
                   cudaStream_t stream) {
    if (g.n_kv_heads < 1 || g.code_bytes < 1 || g.scale_bytes < 0 || n_pos < 0 || pos0 < 0 || !pool || !pages ||
        !image || g.page_bytes < uint64_t(g.n_kv_heads) * kKvPageTokens * uint64_t(g.code_bytes + g.scale_bytes))
        return cudaErrorInvalidValue;
    if (n_pos == 0)
        return cudaSuccess;
    const int n_rows = n_pos * g.n_kv_heads;
    const dim3 grid(unsigned((n_rows + kWarpsPerBlock - 1) / kWarpsPerBlock)), block(32 * kWarpsPerBlock);
    const int w = word_bytes(g, pool, image);
    const int cw = g.code_bytes / w, sw = g.scale_bytes / w;
#define NINFER_KV_ROWS(WORD)                                                                                           \
    kv_rows_kernel<WORD, kGather><<<grid, block, 0, stream>>>(pool, pages, pos0, n_rows, g.n_kv_heads, cw, sw,        \
                                                              g.page_bytes, image)
    switch (w) {
    case 16: NINFER_KV_ROWS(uint4); break;
    case 8: NINFER_KV_ROWS(uint2); break;
    case 4: NINFER_KV_ROWS(uint32_t); break;
    case 2: NINFER_KV_ROWS(uint16_t); break;
    default: NINFER_KV_ROWS(uint8_t); break;
    }
#undef NINFER_KV_ROWS
    return cudaGetLastError();
}

} // namespace

cudaError_t kv_rows_gather(const uint8_t* pool, const int32_t* pages, int pos0, int n_pos, const KvRowGeometry& g,
                           uint8_t* image, cudaStream_t stream) {
    return launch<true>(const_cast<uint8_t*>(pool), pages, pos0, n_pos, g, image, stream);
}

cudaError_t kv_rows_scatter(uint8_t* pool, const int32_t* pages, int pos0, int n_pos, const KvRowGeometry& g,
                            const uint8_t* image, cudaStream_t stream) {
    return launch<false>(pool, pages, pos0, n_pos, g, const_cast<uint8_t*>(image), stream);
}

} // namespace ninfer::kernels
