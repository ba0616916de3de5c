// ninfer::daemon - CORS for the origins configured with --cors-origins (off when empty).
//
// Contract:
// - cors_allows(ctx, origin): the Origin header is non-empty and listed (or the list holds "*").
// - add_cors_headers(writer, origin) on any response to an allowed origin:
//   Access-Control-Allow-Origin (the origin itself), Vary: Origin, and
//   Access-Control-Expose-Headers for the request ids (x-request-id, request-id).
// - answer_preflight(request, writer, allowed): an OPTIONS preflight is answered 204 without
//   auth; for an allowed origin it adds Access-Control-Allow-Methods (GET, POST, DELETE,
//   OPTIONS), Access-Control-Allow-Headers (the requested ones, else the headers the OpenAI and
//   Anthropic SDKs send) and Access-Control-Max-Age; for any other origin it adds none, so the
//   browser refuses the real request.
// Loop thread only.
#pragma once

#include "daemon/daemon_context.h"
#include "daemon/http_server.h"

#include <string_view>

namespace ninfer::daemon {

bool cors_allows(const DaemonContext& ctx, std::string_view origin);
void add_cors_headers(ResponseWriter& writer, std::string_view origin);
void answer_preflight(DaemonContext& ctx, const HttpRequest& request, ResponseWriter& writer, bool allowed);

} // namespace ninfer::daemon
