// ninfer fuzz - Anthropic Messages request bodies, for /v1/messages and count_tokens
// (daemon/anthropic_request.h). The first byte's low bit picks for_count; the rest is the body.
#include "daemon/anthropic_request.h"
#include "tests/fuzz/fuzz_api_body.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    bool for_count = data[0] & 1;
    ninfer::fuzz::check_body_parser(data + 1, size - 1, [for_count](std::string_view body) {
        (void)ninfer::daemon::parse_anthropic_request(body, for_count);
    });
    return 0;
}
