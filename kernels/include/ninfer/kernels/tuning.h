// ninfer::kernels - kernel tuning: the launch-time choices that A/B timing on the GPU machine may
// change, in one struct read once at load.
//
// Contract:
// - KernelTuning{} is the measured best (kernels/PERF_NOTES.md "Kernel switches" lists every switch
//   kept or retired and why). Every setting computes the same bits for the same split count; the
//   choices only select compile-time kernel instances and launch shapes at launch, never a branch
//   inside a kernel.
// - kernel_tuning_parse(lookup) reads the NINFER_* variables below through lookup (getenv's
//   contract: nullptr when unset) and returns the tuning, or throws std::invalid_argument naming the
//   variable, its value and the allowed values. A retired switch that is set is an error too (its
//   alternative is gone, so a run that sets it would measure the default under another name).
//   kernel_tuning_from_env() is kernel_tuning_parse(std::getenv). Plain C++ (no CUDA): the CPU
//   unit tests check it.
// - kernel_tuning_describe(t) is "" for the defaults, else the non-default settings as
//   "NAME=value" words (for the one log line at load).
// - kernel_tuning_apply(t) (CUDA builds only, ninfer_kernels) installs t as the kernels' launch
//   settings: the CUDA backend calls it once at load with its own copy, before any launch or graph
//   capture. Not thread-safe: call between launches. Without a call the defaults hold. The GEMV
//   test hooks of gemv.h override it until gemv_restore_tiled_pipeline(), which restores t.
#pragma once

#include <functional>
#include <string>

namespace ninfer::kernels {

struct KernelTuning {
    // NINFER_PDL=0|1: programmatic dependent launch on every kernel (default on). Off serialises
    // the launches, which step profilers (ncu per-kernel times, trace_step.sh) need.
    bool pdl = true;
    // NINFER_GEMV_STAGES=0|2|3|4: every tiled GEMV launch on the register kernel (0) or on a ring of
    // that many shared-memory stages; -1 (unset, the default): chosen per matrix (gemv.h
    // kGemvRegisterMaxK, kGemvRingMinRows), the register kernel for the latency-bound small-k
    // shapes. Set, it also puts every q4 launch on the int8 route: the e2e tests' way to cover it.
    int gemv_stages = -1;
    // NINFER_GEMV_TARGET_BLOCKS=0..32: resident blocks per SM the tiled split choice aims at on
    // every route; 0 (the default): the occupancy calculator's figure for the path's kernel.
    int gemv_target_blocks = 0;
    // NINFER_GEMV_INT8_TARGET=1..32: blocks per SM the q4 int8 route's split aims at (default 5:
    // the sweep of 4 / 5 / 6 in session 12 made 5 the fastest at both batches).
    int gemv_int8_target_blocks = 5;

};
// Written out: the CUDA sources compile as C++17 (no defaulted comparisons).
inline bool operator==(const KernelTuning& a, const KernelTuning& b) {
    return a.pdl == b.pdl && a.gemv_stages == b.gemv_stages && a.gemv_target_blocks == b.gemv_target_blocks &&
           a.gemv_int8_target_blocks == b.gemv_int8_target_blocks;
}

// getenv's shape: the value of a variable, nullptr when it is unset.
using EnvLookup = std::function<const char*(const char*)>;

KernelTuning kernel_tuning_parse(const EnvLookup& lookup);
KernelTuning kernel_tuning_from_env();
std::string kernel_tuning_describe(const KernelTuning& t);

// CUDA builds only (defined in ninfer_kernels).
void kernel_tuning_apply(const KernelTuning& t);

} // namespace ninfer::kernels
