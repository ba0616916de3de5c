// ninfer::kernels - the RoPE position of one rotary pair of one token (M-RoPE, docs/MODEL.md §5),
// shared by the attention preps (attention_decode.cu, mixers_f32.cu) so they cannot disagree.
//
// Contract: rope_position(geo, pair, t, lane, kv_pos, rope_thw, rope_offset) is token t's
// position on the axis geo.mrope_section gives rotary pair `pair` (0 <= pair < rotary_dim / 2):
// rope_thw[3t + axis] when rope_thw is given (a multimodal chunk's own positions), else
// kv_pos + rope_offset[lane] (rope_offset null: kv_pos), the same on every axis (text).
// Interleaved sections: height where pair % 3 == 1 && pair < 3 * s[1], width where pair % 3 == 2
// && pair < 3 * s[2], temporal otherwise; contiguous: [s[0] temporal | s[1] height | width]; all
// zero: temporal (core/cpu/ops.cpp mrope_tables).
#pragma once

#include "ninfer/kernels/attention_decode.h"

#include <cstdint>

namespace ninfer::kernels::detail {

__device__ __forceinline__ int mrope_axis(const AttnGeometry& g, int pair) {
    const int* s = g.mrope_section;
    if (s[1] == 0 && s[2] == 0) return 0;
    if (g.mrope_interleaved) {
        if (pair % 3 == 1 && pair < 3 * s[1]) return 1;
        if (pair % 3 == 2 && pair < 3 * s[2]) return 2;
        return 0;
    }
    return pair < s[0] ? 0 : pair < s[0] + s[1] ? 1 : 2;
}

__device__ __forceinline__ float rope_position(const AttnGeometry& g, int pair, int t, int lane, int kv_pos,
                                               const int32_t* rope_thw, const int32_t* rope_offset) {
    if (rope_thw) return float(rope_thw[3 * t + mrope_axis(g, pair)]);
    return float(kv_pos + (rope_offset ? rope_offset[lane] : 0));
}

} // namespace ninfer::kernels::detail
