// ninfer fuzz - the chat template (core/frontend/chat_template.h) over conversations that clients
// send. Byte 0 picks the API that parses the rest (bits 0-1: chat, Anthropic, Responses) and the
// render options (bits 2-5); a body the parser refuses is skipped (fuzz_*_request check those).
// The renderer may refuse a conversation (ninfer::Error, a 400), never crash or throw otherwise.
#include "core/frontend/chat_template.h"
#include "daemon/anthropic_request.h"
#include "daemon/chat_request.h"
#include "daemon/responses_request.h"
#include "tests/fuzz/fuzz_api_body.h"

#include <optional>

using namespace ninfer;

namespace {
std::optional<daemon::ChatRequest> parsed(uint8_t api, std::string_view body) {
    try {
        if (api == 1) return daemon::parse_anthropic_request(body, false);
        if (api == 2) return daemon::parse_responses_request(body).chat;
        return daemon::parse_chat_request(body);
    } catch (...) {
        return std::nullopt;
    }
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    std::optional<daemon::ChatRequest> request =
        parsed(data[0] & 3, std::string_view(reinterpret_cast<const char*>(data + 1), size - 1));
    if (!request) return 0;
    core::ChatRenderOptions options;
    options.add_generation_prompt = data[0] & 4;
    options.enable_thinking = data[0] & 8;
    options.preserve_thinking = data[0] & 16;
    options.add_vision_id = data[0] & 32;
    ninfer::fuzz::check_body_parser(data, 0, [&](std::string_view) {
        (void)core::render_chat_prompt(request->conversation, options);
    });
    return 0;
}
