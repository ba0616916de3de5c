// ninfer::daemon - CORS: allowed origins, response headers, preflight answers.
#include "daemon/cors.h"

namespace ninfer::daemon {

bool cors_allows(const DaemonContext& ctx, std::string_view origin) {
    if (origin.empty()) return false;
    for (const std::string& o : ctx.config.cors_origins)
        if (o == "*" || o == origin) return true;
    return false;
}

void add_cors_headers(ResponseWriter& writer, std::string_view origin) {
    writer.add_header("Access-Control-Allow-Origin", std::string(origin));
    writer.add_header("Vary", "Origin");
    writer.add_header("Access-Control-Expose-Headers", "x-request-id, request-id");
}

void answer_preflight(DaemonContext& ctx, const HttpRequest& request, ResponseWriter& writer, bool allowed) {
    if (allowed) {
        std::string_view asked = request.header("access-control-request-headers");
        writer.add_header("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
        writer.add_header("Access-Control-Allow-Headers",
                          asked.empty() ? "Authorization, Content-Type, X-Api-Key, Anthropic-Version, Anthropic-Beta"
                                        : std::string(asked));
        writer.add_header("Access-Control-Max-Age", "600");
    }
    writer.send(204, "", "");
}

} // namespace ninfer::daemon
