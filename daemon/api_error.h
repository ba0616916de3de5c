// ninfer::daemon - one ApiError type for every HTTP failure, rendered in the OpenAI shape.
//
// Contract: {"error":{"message","type","param","code"}} with param/code null when absent (strict
// SDKs expect all four keys). Status and type go together (status_type): 400
// invalid_request_error, 401 authentication_error, 404 not_found_error, 405, 408, 413, 429
// rate_limit_error... Handlers throw or return ApiError; nothing else reaches the client, and bad
// input never becomes a 500. Any thread.
// - api_error_of is the one mapping from a ninfer::Errc to an HTTP error: Invalid 400 (with
//   `param`), NotFound 404, Busy and NoSpace and Unavailable 503 (code "busy", "no_space",
//   "engine_unavailable"), Io and Internal 500 "internal error" (the message is logged, not sent).
#pragma once

#include "core/util/error.h"

#include <string>
#include <string_view>

namespace ninfer::daemon {

struct ApiError {
    int status = 400;
    std::string message;
    std::string code;  // "" = null ("model_not_found", "invalid_api_key", ...)
    std::string param; // "" = null
    std::string type;  // "" = derived from status
};

std::string_view status_type(int status);   // OpenAI error type for an HTTP status
std::string_view status_reason(int status); // "Bad Request", ...
std::string render_openai_error(const ApiError& error);

ApiError api_error_of(const ErrorInfo& error, std::string param = "");

inline ApiError bad_request(std::string message, std::string param = "", std::string code = "") {
    return {400, std::move(message), std::move(code), std::move(param), ""};
}

} // namespace ninfer::daemon
