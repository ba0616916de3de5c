// ninfer::core - NINFER_FAULT=engine_step:N, parsed (test-only fault injection, fault_injection.h).
#include "core/engine/fault_injection.h"

#include "core/util/error.h"

#include <charconv>
#include <string_view>

namespace ninfer::core {

uint64_t engine_fault_step(const char* value) {
    constexpr std::string_view kPrefix = "engine_step:";
    if (!value) return 0;
    const std::string_view v(value);
    if (!v.starts_with(kPrefix)) return 0;
    const std::string_view digits = v.substr(kPrefix.size());
    uint64_t n = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || n < 1 || n > 1000000000)
        throw Error("engine: NINFER_FAULT=" + std::string(v) + ": the step must be a whole number from 1 to 10^9");
    return n;
}

} // namespace ninfer::core
