// ninfer::core - the Gated DeltaNet delta-rule core for one value head (docs/MODEL.md §6), in its
// recurrent form (decode) and its chunked WY/UT form (prefill). Both give the same outputs and the
// same final state up to f32 rounding.
//
// Contract: GdnHeadSequence describes n_tokens consecutive tokens of one value head: q̂ (already
// l2-normalised and scaled by Dk^-0.5), k̂ (l2-normalised), v, the log decay g (<= 0) and beta,
// each with its own row stride in floats. `state` is the head's [Dk][Dv] f32 state S (S[k][v]),
// updated in place; o receives [n_tokens] rows of Dv.
// gdn_chunked splits the tokens into chunks of `chunk` tokens, the first one `first_chunk` long
// (callers align chunks to absolute positions so chunked prefills give identical results).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ninfer::core::cpu {

struct GdnHeadSequence {
    size_t n_tokens = 0;
    uint32_t dk = 0, dv = 0;
    const float* q = nullptr;
    const float* k = nullptr;
    size_t qk_stride = 0;
    const float* v = nullptr;
    size_t v_stride = 0;
    const float* g = nullptr;
    const float* beta = nullptr;
    size_t gb_stride = 0;
    float* o = nullptr;
    size_t o_stride = 0;
};

inline constexpr size_t kGdnChunk = 64;

void gdn_recurrent(const GdnHeadSequence& s, float* state);
void gdn_chunked(const GdnHeadSequence& s, float* state, size_t chunk = kGdnChunk,
                 size_t first_chunk = kGdnChunk);

} // namespace ninfer::core::cpu
