// ninfer::core - LaneImage: the host copy of one lane's whole state (checkpoints, slot files).
//
// Contract:
// - tokens: the sequence's token ids, position i = tokens[i].
// - kv: every full-attention layer's K then V rows of positions [0, n) in kv_dtype's row format
//   (core/model/kv_codec.h); gdn: every GDN layer's conv history, then every GDN layer's fp32
//   recurrent state. The sizes follow MemoryPlan::lane_image_kv_bytes / lane_image_gdn_bytes.
// - The byte layout belongs to the backend that wrote it, but the CPU and CUDA backends use the
//   same one so an image moves between them.
// Thread safety: plain data.
#pragma once

#include "core/model/kv_codec.h"

#include <cstdint>
#include <vector>

namespace ninfer::core {

struct LaneImage {
    std::vector<int32_t> tokens;  // token ids of the sequence, position i = tokens[i]
    KvDtype kv_dtype = KvDtype::Bf16;
    std::vector<uint8_t> kv;      // full-attention layers' K and V rows for positions [0, n)
    std::vector<uint8_t> gdn;     // every GDN layer's conv state then fp32 recurrent state
};

} // namespace ninfer::core
