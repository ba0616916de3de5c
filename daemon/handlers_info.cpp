// ninfer::daemon - read-only routes: /health, /v1/models, /v1/models/{id}, /metrics.
#include "core/util/json_writer.h"
#include "daemon/api_error.h"
#include "daemon/chat_session.h"
#include "daemon/metrics.h"
#include "daemon/routes.h"

namespace ninfer::daemon {
namespace {

void send_json(DaemonContext& ctx, ResponseWriter& writer, int status, const std::string& body) {
    writer.send(status, "application/json", body);
}

void write_model(core::JsonWriter& w, const DaemonContext& ctx) {
    w.begin_object().member("id", ctx.model_id).member("object", "model").member("created", ctx.created_unix);
    w.member("owned_by", "ninfer").member("max_model_len", uint64_t(ctx.config.max_context));
    w.key("meta").begin_object().member("n_ctx", uint64_t(ctx.config.max_context));
    if (ctx.frontend) w.member("n_vocab", uint64_t(ctx.frontend->tokenizer().n_ids()));
    w.end_object();
    // The inputs the served artifact takes: images and video where it has a vision tower.
    const bool vision = ctx.frontend && ctx.frontend->media() && ctx.frontend->media()->takes_media();
    w.key("modalities").begin_array().value("text");
    if (vision) w.value("image").value("video");
    w.end_array().end_object();
}

} // namespace

void handle_health(DaemonContext& ctx, HttpRequest&, std::shared_ptr<ResponseWriter> writer) {
    switch (ctx.state) {
    case ServeState::Ready:
        return send_json(ctx, *writer, 200, R"({"status":"ok"})");
    case ServeState::Loading:
        return send_json(ctx, *writer, 503, R"({"error":{"code":503,"message":"Loading model","type":"unavailable_error"}})");
    case ServeState::Draining:
        return send_json(ctx, *writer, 503, R"({"status":"draining"})");
    case ServeState::Failed:
        break;
    }
    core::JsonWriter w; // the engine failed: ninferd exits to be restarted (server.h)
    w.begin_object().member("status", "failed").member("error", "the inference engine failed: " + ctx.failure).end_object();
    send_json(ctx, *writer, 503, w.take());
}

void handle_models(DaemonContext& ctx, HttpRequest&, std::shared_ptr<ResponseWriter> writer) {
    core::JsonWriter w;
    w.begin_object().member("object", "list").key("data").begin_array();
    write_model(w, ctx);
    w.end_array().end_object();
    send_json(ctx, *writer, 200, w.take());
}

void handle_model_one(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer) {
    std::string_view id = std::string_view(request.path).substr(std::string_view("/v1/models/").size());
    if (id != ctx.model_id)
        throw ApiError{404, "the model '" + std::string(id) + "' does not exist", "model_not_found", "model", ""};
    core::JsonWriter w;
    write_model(w, ctx);
    send_json(ctx, *writer, 200, w.take());
}

void handle_metrics(DaemonContext& ctx, HttpRequest&, std::shared_ptr<ResponseWriter> writer) {
    writer->send(200, "text/plain; version=0.0.4; charset=utf-8", render_metrics(ctx));
}

void handle_chat_completions(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer) {
    ++ctx.counters.n_chat_requests_total;
    if (ctx.state != ServeState::Ready || !ctx.frontend)
        throw ApiError{503, ctx.state == ServeState::Loading ? "the model is loading" : "the engine is unavailable",
                       "model_not_ready", "", ""};
    ChatRequest chat = parse_chat_request(request.body);
    if (!chat.model.empty() && chat.model != ctx.model_id)
        throw ApiError{404, "the model '" + chat.model + "' does not exist; this server serves '" + ctx.model_id + "'",
                       "model_not_found", "model", ""};
    uint64_t id = ctx.next_request_id++;
    writer->add_header("x-request-id", std::to_string(id));
    auto session = std::make_shared<ChatSession>(ctx, id, std::move(chat), std::move(writer));
    session->start();
}

} // namespace ninfer::daemon
