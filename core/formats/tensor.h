// ninfer::core - stored tensors and logical weight bindings: the shared vocabulary between the
// artifact reader (which produces them), the codecs (which decode them) and every backend.
//
// Contract:
// - StoredTensor is a non-owning view of one physical tensor object of an artifact: its format,
//   its shape and its encoded bytes (layout as in docs/ARTIFACT_FORMAT.md §3). The memory is owned
//   by whoever produced the view (usually the mmap of an Artifact) and must outlive the view.
// - WeightBinding is one logical parameter (e.g. "text/layers/3/attention/query"): its logical
//   shape and the ordered list of pieces whose C-order elements, concatenated, form the parameter.
//   A piece is an element range [elem_begin, elem_end) of a stored tensor in the parent's logical
//   C order. For quantized formats a piece always covers whole rows (the reader refuses others).
// Thread safety: plain data, immutable after load; any thread may read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ninfer::core {

// The nine tensor formats of docs/ARTIFACT_FORMAT.md §2, v3 spelling in format.h.
enum class TensorFormat : uint8_t {
    Bf16,
    Fp32,
    Int32,
    Q4G64Fp16,
    Q5G64Fp16,
    Q6G64Fp16,
    Q8G32Fp16,
    Fp8E4m3fnRowBf16,
    Nvfp4,
};

struct StoredTensor {
    std::string id;
    TensorFormat format = TensorFormat::Bf16;
    std::vector<uint64_t> shape;   // logical shape; [] is a scalar
    const uint8_t* data = nullptr; // encoded bytes, `bytes` long
    uint64_t bytes = 0;
};

struct WeightPiece {
    const StoredTensor* tensor = nullptr;
    uint64_t elem_begin = 0; // in the parent's logical C order
    uint64_t elem_end = 0;
};

struct WeightBinding {
    std::string name;            // logical parameter name
    std::vector<uint64_t> shape; // logical shape of the parameter
    std::vector<WeightPiece> pieces;
};

} // namespace ninfer::core
