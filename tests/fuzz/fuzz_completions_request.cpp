// ninfer fuzz - OpenAI legacy completions request bodies (daemon/completions_session.h).
#include "daemon/completions_session.h"
#include "tests/fuzz/fuzz_api_body.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    ninfer::fuzz::check_body_parser(data, size, [](std::string_view body) { (void)ninfer::daemon::parse_completions_request(body); });
    return 0;
}
