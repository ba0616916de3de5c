// ninfer fuzz - OpenAI Responses request bodies (daemon/responses_request.h).
#include "daemon/responses_request.h"
#include "tests/fuzz/fuzz_api_body.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    ninfer::fuzz::check_body_parser(data, size, [](std::string_view body) { (void)ninfer::daemon::parse_responses_request(body); });
    return 0;
}
