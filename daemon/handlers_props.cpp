// ninfer::daemon - GET /props (server and default generation settings, llama.cpp's shape) and
// GET /slots (read-only lane list; slot save/restore stays on the control socket).
#include "core/util/json_writer.h"
#include "daemon/api_common.h"
#include "daemon/chat_session.h"
#include "daemon/routes.h"

namespace ninfer::daemon {
namespace {

int n_lanes_of(const DaemonContext& ctx) {
    int n = ctx.engine ? ctx.engine->stats().n_lanes.load() : 0;
    return n > 0 ? n : ctx.config.max_concurrency;
}

void send_json_200(DaemonContext& ctx, ResponseWriter& writer, const std::string& body) {
    writer.send(200, "application/json", body);
}

} // namespace

void handle_props(DaemonContext& ctx, HttpRequest&, std::shared_ptr<ResponseWriter> writer) {
    writer->add_header("x-request-id", std::to_string(ctx.next_request_id++));
    const DaemonConfig& c = ctx.config;
    core::JsonWriter w;
    w.begin_object().key("default_generation_settings").begin_object();
    w.member("n_ctx", uint64_t(c.max_context)).key("params").begin_object();
    // The defaults in force: the options over the model's generation_config.json (once loaded).
    const core::SamplingParams d =
        core::resolve_sampling(ctx.frontend ? ctx.frontend->sampling_defaults() : core::SamplingDefaults{}, c.sampling, {});
    w.member("temperature", double(d.temperature)).member("top_p", double(d.top_p)).member("top_k", d.top_k);
    w.member("min_p", double(d.min_p)).member("presence_penalty", double(d.presence_penalty));
    w.member("frequency_penalty", double(d.frequency_penalty)).member("repeat_penalty", double(d.repetition_penalty));
    if (c.sampling.seed) w.member("seed", *c.sampling.seed);
    w.member("n_predict", uint64_t(c.default_max_tokens)).member("max_tokens", uint64_t(c.default_max_tokens));
    w.member("enable_thinking", c.enable_thinking).end_object().end_object();
    w.member("total_slots", n_lanes_of(ctx)).member("model_path", c.artifact_path).member("model_alias", ctx.model_id);
    w.member("chat_template", "qwen3.5 (built-in renderer)");
    // Whether the served artifact takes images and video (it has a vision tower; daemon/media_input.h).
    const bool vision = ctx.frontend && ctx.frontend->media() && ctx.frontend->media()->takes_media();
    w.key("modalities").begin_object().member("vision", vision).member("image", vision).member("video", vision);
    w.member("audio", false).end_object();
    w.member("build_info", "ninfer-" NINFER_VERSION_STRING).member("is_sleeping", false);
    w.member("state", ctx.state == ServeState::Ready ? "ready" : ctx.state == ServeState::Loading ? "loading" : "unavailable");
    w.end_object();
    send_json_200(ctx, *writer, w.take());
}

// [{id, n_ctx, is_processing, id_task, n_prompt_tokens, n_decoded}] for every lane;
// ?fail_on_no_slot=1 answers 503 when every lane is busy.
void handle_slots(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer) {
    writer->add_header("x-request-id", std::to_string(ctx.next_request_id++));
    int n = n_lanes_of(ctx);
    std::vector<const ChatSession*> by_lane(size_t(n), nullptr);
    for (const auto& [id, session] : ctx.sessions)
        if (session->lane() >= 0 && session->lane() < n) by_lane[size_t(session->lane())] = session.get();
    bool any_free = false;
    core::JsonWriter w;
    w.begin_array();
    for (int lane = 0; lane < n; ++lane) {
        const ChatSession* s = by_lane[size_t(lane)];
        any_free |= s == nullptr;
        w.begin_object().member("id", lane).member("n_ctx", uint64_t(ctx.config.max_context));
        w.member("is_processing", s != nullptr).member("id_task", s ? int64_t(s->id()) : int64_t(-1));
        w.member("n_prompt_tokens", uint64_t(s ? s->n_prompt_tokens() : 0));
        w.member("n_decoded", uint64_t(s ? s->n_generated_tokens() : 0)).end_object();
    }
    w.end_array();
    if (!any_free && request.query.find("fail_on_no_slot=1") != std::string::npos)
        throw ApiError{503, "no slot available", "no_slot_available", "", ""};
    send_json_200(ctx, *writer, w.take());
}

} // namespace ninfer::daemon
