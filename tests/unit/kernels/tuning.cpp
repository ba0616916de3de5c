// Kernel tuning switches (ninfer/kernels/tuning.h): defaults, each kept switch, bad values and
// retired switches refused with the variable's name.
#include "ninfer/kernels/tuning.h"

#include <catch2/catch.hpp>

#include <map>
#include <stdexcept>
#include <string>

using ninfer::kernels::KernelTuning;
using ninfer::kernels::kernel_tuning_describe;
using ninfer::kernels::kernel_tuning_parse;

namespace {

KernelTuning parse(const std::map<std::string, std::string>& env) {
    return kernel_tuning_parse([&](const char* name) -> const char* {
        const auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
    });
}

// The message of the error parse(env) throws ("" when it does not throw).
std::string error_of(const std::map<std::string, std::string>& env) {
    try {
        parse(env);
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "";
}

} // namespace

TEST_CASE("kernel tuning: nothing set gives the defaults, described as nothing", "[tuning]") {
    const KernelTuning t = parse({});
    CHECK(t == KernelTuning{});
    CHECK(t.pdl);
    CHECK(t.gemv_stages == -1);
    CHECK(t.gemv_target_blocks == 0);
    CHECK(t.gemv_int8_target_blocks == 5);
    CHECK(kernel_tuning_describe(t).empty());
    // An empty value is unset (a shell's `NAME= cmd`), for kept and retired switches alike.
    CHECK(parse({{"NINFER_PDL", ""}, {"NINFER_MOE_MMA", ""}}) == KernelTuning{});
}

TEST_CASE("kernel tuning: each kept switch sets its field and is described", "[tuning]") {
    CHECK_FALSE(parse({{"NINFER_PDL", "0"}}).pdl);
    CHECK(parse({{"NINFER_PDL", "1"}}).pdl);
    for (int s : {0, 2, 3, 4}) CHECK(parse({{"NINFER_GEMV_STAGES", std::to_string(s)}}).gemv_stages == s);
    CHECK(parse({{"NINFER_GEMV_TARGET_BLOCKS", "6"}}).gemv_target_blocks == 6);
    CHECK(parse({{"NINFER_GEMV_TARGET_BLOCKS", "32"}}).gemv_target_blocks == 32);
    CHECK(parse({{"NINFER_GEMV_INT8_TARGET", "1"}}).gemv_int8_target_blocks == 1);

    const KernelTuning t = parse({{"NINFER_PDL", "0"}, {"NINFER_GEMV_STAGES", "2"}, {"NINFER_GEMV_INT8_TARGET", "6"}});
    CHECK(kernel_tuning_describe(t) == "NINFER_PDL=0 NINFER_GEMV_STAGES=2 NINFER_GEMV_INT8_TARGET=6");
    // Setting a switch to its default value is not a change.
    CHECK(kernel_tuning_describe(parse({{"NINFER_PDL", "1"}, {"NINFER_GEMV_INT8_TARGET", "5"}})).empty());
    // NINFER_GEMV_STAGES=2 is not the default: it puts every launch on the 2-stage ring.
    CHECK(kernel_tuning_describe(parse({{"NINFER_GEMV_STAGES", "2"}})) == "NINFER_GEMV_STAGES=2");
}

TEST_CASE("kernel tuning: a bad value names the variable, the value and what is allowed", "[tuning]") {
    const std::map<std::string, std::string> bad[] = {
        {{"NINFER_PDL", "2"}},         {{"NINFER_PDL", "off"}},           {{"NINFER_PDL", "0 "}},
        {{"NINFER_GEMV_STAGES", "1"}}, {{"NINFER_GEMV_STAGES", "5"}},     {{"NINFER_GEMV_STAGES", "-1"}},
        {{"NINFER_GEMV_STAGES", "2x"}}, {{"NINFER_GEMV_TARGET_BLOCKS", "33"}}, {{"NINFER_GEMV_TARGET_BLOCKS", "-3"}},
        {{"NINFER_GEMV_INT8_TARGET", "0"}}, {{"NINFER_GEMV_INT8_TARGET", "99999999999"}},
    };
    for (const auto& env : bad) {
        const auto& [name, value] = *env.begin();
        const std::string e = error_of(env);
        INFO(name << "=" << value << ": " << e);
        CHECK(e.find(name + "='" + value + "'") != std::string::npos);
        CHECK(e.find("not allowed") != std::string::npos);
    }
    CHECK_THAT(error_of({{"NINFER_GEMV_STAGES", "1"}}), Catch::Contains("0 (register kernel) or 2, 3, 4"));
    CHECK_THAT(error_of({{"NINFER_PDL", "yes"}}), Catch::Contains("0 (no programmatic dependent launch) or 1"));
}

TEST_CASE("kernel tuning: a retired switch is refused, not ignored", "[tuning]") {
    for (const char* name : {"NINFER_GEMV_STAGE_X", "NINFER_GEMV_CLUSTER", "NINFER_GEMV_TILED_Q5Q8",
                             "NINFER_GEMV_RING_ROWS", "NINFER_GEMV_INT8_XCAP", "NINFER_ATTN_DECODE", "NINFER_GDN_DECODE",
                             "NINFER_MOE_MMA", "NINFER_MOE_ACT_PAIRS", "NINFER_MOE_XPARTS_EARLY", "NINFER_Q4_INT8_X",
                             "NINFER_Q4_INT8_PRODUCER"}) {
        const std::string e = error_of({{name, "0"}});
        INFO(name << ": " << e);
        CHECK(e.find(std::string(name) + "='0'") != std::string::npos);
        CHECK(e.find("retired") != std::string::npos);
        CHECK(e.find("unset it") != std::string::npos);
    }
}
