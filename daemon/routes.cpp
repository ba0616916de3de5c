// ninfer::daemon - route table, CORS, API-key check and error containment for every request.
#include "daemon/routes.h"

#include "daemon/anthropic_session.h"
#include "daemon/api_error.h"
#include "daemon/chat_session.h"
#include "daemon/cors.h"
#include "daemon/log.h"

#include <simdjson.h>

#include <algorithm>

namespace ninfer::daemon {
namespace {

constexpr Route kRoutes[] = {
    {"GET", "/health", handle_health, true, true},
    {"GET", "/v1/health", handle_health, true, true},
    {"GET", "/v1/models", handle_models, false, true},
    {"GET", "/models", handle_models, false, true},
    {"GET", "/v1/models/", handle_model_one, false, true},
    {"GET", "/metrics", handle_metrics, false, true},
    {"POST", "/v1/chat/completions", handle_chat_completions, false, false},
    {"POST", "/chat/completions", handle_chat_completions, false, false},
    {"POST", "/v1/responses", handle_responses_create, false, false},
    {"POST", "/v1/responses/input_tokens", handle_responses_input_tokens, false, false},
    {"GET", "/v1/responses/", handle_responses_get, false, true},
    {"DELETE", "/v1/responses/", handle_responses_delete, false, true},
    {"POST", "/v1/messages", handle_messages, false, false},
    {"POST", "/v1/messages/count_tokens", handle_count_tokens, false, false},
    {"POST", "/v1/completions", handle_completions, false, false},
    {"POST", "/completions", handle_completions, false, false},
    {"POST", "/tokenize", handle_tokenize, false, true},
    {"POST", "/detokenize", handle_detokenize, false, true},
    {"GET", "/props", handle_props, false, true},
    {"GET", "/slots", handle_slots, false, true},
    {"GET", "/monitor", handle_monitor, true, true}, // static page, no figures: see daemon/monitor.h
    {"GET", "/monitor/stats", handle_monitor_stats, false, true},
    {"GET", "/monitor/history", handle_monitor_history, false, true},
};

bool path_matches(const Route& r, std::string_view path) {
    if (r.path.back() == '/' && r.path.size() > 1)
        return path.size() > r.path.size() && path.substr(0, r.path.size()) == r.path;
    return path == r.path;
}

// Each API answers in its own error shape.
void send_error(DaemonContext& ctx, const HttpRequest& request, ResponseWriter& writer, const ApiError& e) {
    is_anthropic_route(request.path) ? respond_anthropic_error(ctx, writer, e) : respond_error(ctx, writer, e);
}

} // namespace

bool constant_time_equals(std::string_view a, std::string_view b) {
    size_t n = std::max(a.size(), b.size());
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    for (size_t i = 0; i < n; ++i) {
        unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
        unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
        diff |= static_cast<unsigned char>(x ^ y);
    }
    return diff == 0;
}

bool is_authorized(const DaemonContext& ctx, const HttpRequest& request) {
    if (ctx.config.api_keys.empty()) return true;
    std::string_view presented = request.header("x-api-key");
    std::string_view auth = request.header("authorization");
    if (presented.empty() && auth.size() > 7 && (auth.substr(0, 7) == "Bearer " || auth.substr(0, 7) == "bearer "))
        presented = auth.substr(7);
    if (presented.empty()) return false;
    bool ok = false;
    for (const std::string& key : ctx.config.api_keys) ok |= constant_time_equals(presented, key);
    return ok;
}

void dispatch(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer) {
    std::string_view origin = request.header("origin");
    bool cors = cors_allows(ctx, origin);
    if (cors) add_cors_headers(*writer, origin);
    const Route* path_match = nullptr;
    const Route* route = nullptr;
    // HEAD is GET without the body (RFC 9110 9.3.2): same route, status and headers.
    const bool head = request.method == "HEAD";
    if (head) writer->omit_body();
    const std::string_view method = head ? std::string_view("GET") : std::string_view(request.method);
    for (const Route& r : kRoutes) {
        if (!path_matches(r, request.path)) continue;
        path_match = &r;
        if (r.method == method) {
            route = &r;
            break;
        }
    }
    if (request.method == "OPTIONS" && path_match) return answer_preflight(ctx, request, *writer, cors);
    bool is_public = route && route->is_public;
    if (!is_public && !is_authorized(ctx, request))
        return send_error(ctx, request, *writer, {401, "invalid or missing API key", "invalid_api_key", "", ""});
    if (!path_match)
        return send_error(ctx, request, *writer, {404, "no route " + request.method + " " + request.path, "not_found", "", ""});
    if (!route)
        return send_error(ctx, request, *writer, {405, "method " + request.method + " not allowed on " + request.path,
                                         "method_not_allowed", "", ""});
    if (ctx.state == ServeState::Failed && !route->works_while_draining) // exiting (server.h)
        return send_error(ctx, request, *writer,
                          api_error_of({Errc::Unavailable, "the inference engine failed (" + ctx.failure +
                                                               "); ninferd exits to be restarted"}));
    if (ctx.state == ServeState::Draining && !route->works_while_draining)
        return send_error(ctx, request, *writer, {503, "the server is shutting down", "server_shutting_down", "", ""});
    if (ctx.admission_paused && !route->works_while_draining)
        return send_error(ctx, request, *writer, {503, "the server is draining (ninferctl drain)", "server_draining", "", ""});
    try {
        route->handler(ctx, request, writer);
    } catch (const ApiError& e) {
        send_error(ctx, request, *writer, e);
    } catch (const simdjson::simdjson_error& e) {
        // Only the request parsers use simdjson: an error a field reader did not turn into a
        // named 400 is still the client's JSON, never a server fault.
        send_error(ctx, request, *writer, bad_request(std::string("request body has an unexpected shape: ") + e.what()));
    } catch (const std::exception& e) {
        send_error(ctx, request, *writer, api_error_of(error_info(e)));
    }
}

} // namespace ninfer::daemon
