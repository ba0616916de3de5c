// ninfer::kernels - kernel tuning: the NINFER_* switches parsed once, checked, and described (plain C++).
#include "ninfer/kernels/tuning.h"

#include <charconv>
#include <cstdlib>
#include <stdexcept>

namespace ninfer::kernels {

namespace {

// A switch whose alternative lost its measurement: set, it is refused with this reason.
struct Retired {
    const char* name;
    const char* why;
};
constexpr Retired kRetired[] = {
    {"NINFER_GEMV_STAGE_X", "x staged in shared memory won (Decode GEMV v4)"},
    {"NINFER_GEMV_CLUSTER", "split-K sums within a cluster won (session 7)"},
    {"NINFER_GEMV_TILED_Q5Q8", "the tiled q5/q6/q8 layout won (Tiled q5/q6/q8 decode layout)"},
    {"NINFER_GEMV_RING_ROWS", "tall matrices on the ring from 65536 rows won (session 12 run 6)"},
    {"NINFER_GEMV_INT8_XCAP", "a cap below the shared-memory stage lost at batch 1 (session 5, W4A8)"},
    {"NINFER_ATTN_DECODE", "staged at one token, split above won (session 6)"},
    {"NINFER_GDN_DECODE", "the Wide4 recurrence won at every batch (session 6)"},
    {"NINFER_MOE_MMA", "the tensor-core MoE path won (session 7)"},
    {"NINFER_MOE_ACT_PAIRS", "act parts stored by row pairs won (session 12 run 11)"},
    {"NINFER_MOE_XPARTS_EARLY", "x parts loaded before the router dots won (session 12 run 6)"},
    {"NINFER_Q4_INT8_X", "int8 activations for q4 won (session 5)"},
    {"NINFER_Q4_INT8_PRODUCER", "GEMVs quantise x at batch 1, the producers above won (session 5, W4A8)"},
};

[[noreturn]] void refuse(const char* name, const std::string& value, const char* allowed) {
    throw std::invalid_argument(std::string(name) + "='" + value + "' is not allowed: " + allowed);
}

// The variable's value, nullptr when unset or empty (a shell's `NAME= cmd` means unset).
const char* value_of(const EnvLookup& lookup, const char* name) {
    const char* v = lookup(name);
    return v && v[0] ? v : nullptr;
}

// An integer in [lo, hi], the whole value in decimal digits.
int int_in(const char* name, const char* v, int lo, int hi, const char* allowed) {
    const std::string s(v);
    int i = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), i);
    if (ec != std::errc() || end != s.data() + s.size() || i < lo || i > hi) refuse(name, s, allowed);
    return i;
}

} // namespace

KernelTuning kernel_tuning_parse(const EnvLookup& lookup) {
    for (const Retired& r : kRetired)
        if (const char* v = value_of(lookup, r.name))
            throw std::invalid_argument(std::string(r.name) + "='" + v + "': this switch was retired (" + r.why +
                                        "; kernels/PERF_NOTES.md \"Kernel switches\"); unset it");
    KernelTuning t;
    if (const char* v = value_of(lookup, "NINFER_PDL"))
        t.pdl = int_in("NINFER_PDL", v, 0, 1, "0 (no programmatic dependent launch) or 1 (the default)") == 1;
    if (const char* v = value_of(lookup, "NINFER_GEMV_STAGES")) {
        t.gemv_stages = int_in("NINFER_GEMV_STAGES", v, 0, 4, "0 (register kernel) or 2, 3, 4 (ring stages)");
        if (t.gemv_stages == 1) refuse("NINFER_GEMV_STAGES", v, "0 (register kernel) or 2, 3, 4 (ring stages)");
    }
    if (const char* v = value_of(lookup, "NINFER_GEMV_TARGET_BLOCKS"))
        t.gemv_target_blocks =
            int_in("NINFER_GEMV_TARGET_BLOCKS", v, 0, 32, "0 (the occupancy calculator's figure) .. 32 blocks per SM");
    if (const char* v = value_of(lookup, "NINFER_GEMV_INT8_TARGET"))
        t.gemv_int8_target_blocks = int_in("NINFER_GEMV_INT8_TARGET", v, 1, 32, "1 .. 32 blocks per SM (default 5)");
    return t;
}

KernelTuning kernel_tuning_from_env() {
    return kernel_tuning_parse([](const char* name) -> const char* { return std::getenv(name); });
}

std::string kernel_tuning_describe(const KernelTuning& t) {
    const KernelTuning d;
    std::string out;
    const auto add = [&](const char* name, int value) {
        out += (out.empty() ? "" : " ") + std::string(name) + "=" + std::to_string(value);
    };
    if (t.pdl != d.pdl) add("NINFER_PDL", t.pdl ? 1 : 0);
    if (t.gemv_stages != d.gemv_stages) add("NINFER_GEMV_STAGES", t.gemv_stages);
    if (t.gemv_target_blocks != d.gemv_target_blocks) add("NINFER_GEMV_TARGET_BLOCKS", t.gemv_target_blocks);
    if (t.gemv_int8_target_blocks != d.gemv_int8_target_blocks) add("NINFER_GEMV_INT8_TARGET", t.gemv_int8_target_blocks);
    return out;
}

} // namespace ninfer::kernels
