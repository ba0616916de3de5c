// ninfer::daemon - ApiError rendering and the HTTP status tables.
#include "daemon/api_error.h"

#include "core/frontend/unicode_utf8.h"
#include "core/util/json_writer.h"
#include "daemon/log.h"

namespace ninfer::daemon {
namespace {

struct StatusInfo {
    int status;
    std::string_view reason;
    std::string_view type;
};

constexpr StatusInfo kStatuses[] = {
    {100, "Continue", ""},
    {200, "OK", ""},
    {204, "No Content", ""},
    {400, "Bad Request", "invalid_request_error"},
    {401, "Unauthorized", "authentication_error"},
    {403, "Forbidden", "permission_error"},
    {404, "Not Found", "not_found_error"},
    {405, "Method Not Allowed", "invalid_request_error"},
    {408, "Request Timeout", "timeout_error"},
    {413, "Payload Too Large", "invalid_request_error"},
    {415, "Unsupported Media Type", "invalid_request_error"},
    {429, "Too Many Requests", "rate_limit_error"},
    {431, "Request Header Fields Too Large", "invalid_request_error"},
    {500, "Internal Server Error", "server_error"},
    {501, "Not Implemented", "not_supported_error"},
    {503, "Service Unavailable", "unavailable_error"},
};

const StatusInfo* find_status(int status) {
    for (const StatusInfo& s : kStatuses)
        if (s.status == status) return &s;
    return nullptr;
}

} // namespace

std::string_view status_type(int status) {
    const StatusInfo* s = find_status(status);
    return s && !s->type.empty() ? s->type : (status >= 500 ? "server_error" : "invalid_request_error");
}

std::string_view status_reason(int status) {
    const StatusInfo* s = find_status(status);
    return s ? s->reason : (status >= 500 ? "Server Error" : "Error");
}

ApiError api_error_of(const ErrorInfo& error, std::string param) {
    switch (error.kind) {
    case Errc::Invalid: return bad_request(error.message, std::move(param));
    case Errc::NotFound: return {404, error.message, "not_found", std::move(param), ""};
    case Errc::Busy: return {503, error.message, "busy", "", ""};
    case Errc::NoSpace: return {503, error.message, "no_space", "", ""};
    case Errc::Unavailable: return {503, error.message, "engine_unavailable", "", ""};
    case Errc::Io:
    case Errc::Internal: break;
    }
    log_error("http, internal error: " + error.message);
    return {500, "internal error", "internal_error", "", ""};
}

std::string render_openai_error(const ApiError& e) {
    core::JsonWriter w;
    w.begin_object().key("error").begin_object();
    // Messages may echo client bytes (a path, a header): never let invalid UTF-8 break the JSON.
    w.member("message", core::utf8_lossy(e.message));
    w.member("type", e.type.empty() ? status_type(e.status) : std::string_view(e.type));
    w.key("param");
    e.param.empty() ? w.null() : w.value(core::utf8_lossy(e.param));
    w.key("code");
    e.code.empty() ? w.null() : w.value(std::string_view(e.code));
    w.end_object().end_object();
    return w.take();
}

} // namespace ninfer::daemon
