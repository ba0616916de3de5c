// ninfer::core - patch rows of one temporal patch: (t, by, bx, my, mx) x (c, frame, y, x).
#include "core/media/patchify.h"

namespace ninfer::core {

void patchify_frames(std::span<const uint8_t* const> frames, int64_t height, int64_t width, int64_t t,
                     const MediaPreprocess& p, std::vector<float>& out) {
    const int64_t P = p.patch_size, M = p.merge_size, T = int64_t(frames.size());
    const int64_t gh = height / P, gw = width / P;
    const int64_t dim = 3 * T * P * P;
    // Each channel's 256 possible values, normalised once: the same float expression per value,
    // so a table lookup gives the bits the per-pixel arithmetic gave.
    float normalised[3][256];
    for (int c = 0; c < 3; ++c) {
        const float mean = p.mean[size_t(c)] * float(1.0 / p.rescale_factor);
        const float stdev = p.std[size_t(c)] * float(1.0 / p.rescale_factor);
        for (int v = 0; v < 256; ++v) normalised[c][v] = (float(v) - mean) / stdev;
    }
    float* row = out.data() + size_t(t * gh * gw * dim);
    for (int64_t by = 0; by < gh / M; ++by)
        for (int64_t bx = 0; bx < gw / M; ++bx)
            for (int64_t my = 0; my < M; ++my)
                for (int64_t mx = 0; mx < M; ++mx, row += dim) {
                    const int64_t y0 = (by * M + my) * P, x0 = (bx * M + mx) * P;
                    float* v = row;
                    for (int64_t c = 0; c < 3; ++c)
                        for (int64_t f = 0; f < T; ++f)
                            for (int64_t y = 0; y < P; ++y) {
                                const uint8_t* src = frames[size_t(f)] + ((y0 + y) * width + x0) * 3 + c;
                                const float* lut = normalised[c];
                                for (int64_t x = 0; x < P; ++x) *v++ = lut[src[x * 3]];
                            }
                }
}

} // namespace ninfer::core
