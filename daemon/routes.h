// ninfer::daemon - the HTTP route table and the checks every request passes: CORS, auth, state.
//
// Contract:
// - dispatch(ctx, request, writer) finds the route by exact path (or a registered prefix such as
//   /v1/models/), answers OPTIONS preflights (204 with Access-Control-Allow-* when the Origin is
//   allowed), requires the API key on every route but /health and the /monitor page (Bearer or
//   x-api-key, compared in constant time) -> 401 invalid_api_key, unknown paths -> 404, wrong
//   methods -> 405, and while draining -> 503 for everything but /health. HEAD is answered as
//   GET without the body (an error included). Handlers are table
//   entries, never an if-chain.
// - Handlers never let an exception escape: dispatch converts ApiError to its status and any
//   other exception to 500 internal_error (a bug, logged).
// - constant_time_equals(a, b) touches every byte of the longer input whatever the content.
#pragma once

#include "daemon/daemon_context.h"
#include "daemon/http_server.h"

#include <memory>
#include <string_view>

namespace ninfer::daemon {

using RouteHandler = void (*)(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer);

struct Route {
    std::string_view method;
    std::string_view path;   // exact, or a prefix when it ends with '/'
    RouteHandler handler;
    bool is_public;          // no API key needed
    bool works_while_draining;
};

void dispatch(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer);
bool constant_time_equals(std::string_view a, std::string_view b);
bool is_authorized(const DaemonContext& ctx, const HttpRequest& request);

// Handlers (handlers_info.cpp, handlers_chat.cpp).
void handle_health(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer);
void handle_models(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer);
void handle_model_one(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer);
void handle_metrics(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer);
void handle_chat_completions(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer);
// Other APIs (responses_session.cpp, anthropic_session.cpp, completions_session.cpp,
// handlers_tokenize.cpp, handlers_props.cpp).
void handle_responses_create(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer);
void handle_responses_input_tokens(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer);
void handle_responses_get(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer);
void handle_responses_delete(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer);
void handle_messages(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer);
void handle_count_tokens(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer);
void handle_completions(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer);
void handle_tokenize(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer);
void handle_detokenize(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer);
void handle_props(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer);
void handle_slots(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer);
// The live view (handlers_monitor.cpp).
void handle_monitor(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer);
void handle_monitor_stats(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer);
void handle_monitor_history(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer);

} // namespace ninfer::daemon
