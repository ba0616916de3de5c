// ninfer::daemon - control ops by table: status, settings, metrics, slots, cache, drain, resume, log level, reload.
#include "core/util/error.h"
#include "daemon/control_server.h"
#include "daemon/journal.h"
#include "daemon/log.h"
#include "daemon/serve_figures.h"
#include "proto/messages.h"

#include <systemd/sd-daemon.h>

#include <algorithm>
#include <chrono>
#include <ctime>

namespace ninfer::daemon {
namespace {

using ConnPtr = ControlServer::ConnPtr;
using proto::Frame;
using proto::Status;
using Clock = std::chrono::steady_clock;

template <typename T> std::optional<T> payload_of(ControlServer& s, const ConnPtr& c, const Frame& f) {
    std::optional<T> v = proto::decode_payload<T>(f.payload);
    if (!v) s.reply_error(c, f, Status::BadMessage, std::string(proto::op_name(f.header.op)) + ": malformed payload");
    return v;
}

template <typename T> void reply_ok(ControlServer& s, const ConnPtr& c, const Frame& f, const T& value) {
    s.reply(c, f, Status::Ok, proto::encode_payload(value));
}

std::vector<proto::LaneInfo> lanes_of(const DaemonContext& ctx) {
    std::vector<proto::LaneInfo> out;
    for (const LaneFigure& l : read_serve_figures(ctx).lanes) out.push_back({uint32_t(l.id), l.phase, l.tokens});
    return out;
}

void handle_status(ControlServer& s, const ConnPtr& c, const Frame& f) {
    const DaemonContext& ctx = *s.deps().ctx;
    const PlannedModel& m = *s.deps().model;
    proto::StatusReply r;
    r.version = NINFER_VERSION_STRING;
    r.model_id = ctx.model_id;
    r.artifact = ctx.config.artifact_path;
    r.device = ctx.device_in_use.empty() ? ctx.config.device : ctx.device_in_use; // cpu/cuda, not "auto"
    r.synthetic = m.artifact->is_synthetic();
    r.draining = ctx.state == ServeState::Draining || ctx.admission_paused;
    r.uptime_s = uint64_t(std::max<int64_t>(0, int64_t(std::time(nullptr)) - ctx.created_unix));
    r.queue_length = uint32_t(ctx.engine->stats().n_requests_waiting.load());
    r.max_pending = ctx.config.max_pending;
    r.lanes = lanes_of(ctx);
    r.memory_plan = {m.plan.weight_bytes, m.plan.kv_bytes, m.plan.kv_capacity_tokens, m.plan.gdn_bytes,
                     m.plan.workspace_bytes, ctx.config.host_cache_mib << 20};
    const core::EngineStats& stats = ctx.engine->stats();
    r.speculative = ctx.config.speculative;
    r.spec_rounds = stats.n_spec_rounds_total;
    r.spec_draft_tokens = stats.n_spec_draft_tokens_total;
    r.spec_accepted_tokens = stats.n_spec_accepted_tokens_total;
    reply_ok(s, c, f, r);
}

// `ninferctl status --settings`: the option table's rows with their running values (options.h).
void handle_settings(ControlServer& s, const ConnPtr& c, const Frame& f) {
    proto::SettingsReply r;
    for (const Settings::Effective& e : s.deps().ctx->settings.effective())
        r.settings.push_back({std::string(e.option->name), e.value, e.is_default,
                              (e.option->flags & kOptionReloadable) != 0});
    reply_ok(s, c, f, r);
}

// The figures /metrics and /monitor/stats show (serve_figures.h), in the control protocol's shape.
proto::MetricsReply metrics_of(const DaemonContext& ctx) {
    const ServeFigures fig = read_serve_figures(ctx);
    proto::MetricsReply r;
    r.requests_total = fig.requests_finished_total + fig.requests_cancelled_total + fig.requests_rejected_total;
    r.requests_failed = fig.requests_rejected_total;
    r.prompt_tokens_total = fig.prompt_tokens_total;
    r.generated_tokens_total = fig.generation_tokens_total;
    r.cached_tokens_total = fig.prompt_tokens_cached_total;
    r.prompt_tokens_per_s = fig.prompt_tokens_per_s;
    r.generated_tokens_per_s = fig.generated_tokens_per_s;
    r.ttft_ms_mean = mean_seconds(ctx.counters.ttft_seconds) * 1000.0;
    r.queue_length = uint32_t(fig.n_requests_waiting);
    r.lanes_busy = uint32_t(fig.n_requests_running);
    r.kv_used_tokens = fig.kv_reserved_tokens;
    r.kv_capacity_tokens = fig.kv_capacity_tokens;
    r.cache_hits = fig.prefix_cache_hits_total;
    r.cache_misses = fig.prefix_cache_misses_total;
    return r;
}

void handle_metrics(ControlServer& s, const ConnPtr& c, const Frame& f) { reply_ok(s, c, f, metrics_of(*s.deps().ctx)); }

void handle_metrics_watch(ControlServer& s, const ConnPtr& c, const Frame& f) {
    auto req = payload_of<proto::MetricsWatchRequest>(s, c, f);
    if (!req) return;
    if (req->interval_ms < 100) return s.reply_error(c, f, Status::Invalid, "metrics-watch: interval below 100 ms");
    s.start_watch(c, f, req->interval_ms, req->count);
}

void handle_slot_list(ControlServer& s, const ConnPtr& c, const Frame& f) {
    proto::SlotListReply r;
    r.slots = lanes_of(*s.deps().ctx);
    r.saved_names = core::slot_file_names(s.deps().ctx->engine->lane_options().slots_dir);
    reply_ok(s, c, f, r);
}

// The engine's result for this request, answered on the loop thread: the one engine/I-O -> loop hop
// of every lane-state op. reply(server, c, f, result) runs only when the result holds no error.
template <typename Result, typename Reply>
std::function<void(Result)> answer_on_loop(ControlServer& s, const ConnPtr& c, const Frame& f, Reply reply) {
    ControlServer* server = &s;
    return [server, c, f, reply](Result r) {
        server->post([server, c, f, reply, r = std::move(r)] {
            if (r.error) return server->reply_error(c, f, *r.error);
            reply(*server, c, f, r);
        });
    };
}

std::optional<proto::SlotRequest> slot_request_of(ControlServer& s, const ConnPtr& c, const Frame& f, bool named) {
    auto req = payload_of<proto::SlotRequest>(s, c, f);
    if (req && named && !proto::is_valid_slot_name(req->name)) {
        s.reply_error(c, f, Status::Invalid, "invalid slot name '" + req->name + "'");
        return std::nullopt;
    }
    return req;
}

void reply_slot(ControlServer& s, const ConnPtr& c, const Frame& f, const core::LaneOpResult& r) {
    reply_ok(s, c, f, proto::SlotReply{uint32_t(r.lane), r.n_tokens, r.bytes, r.elapsed_ms});
}

// Save: the engine copies the lane at a step boundary, its I/O worker writes the file.
void handle_slot_save(ControlServer& s, const ConnPtr& c, const Frame& f) {
    auto req = slot_request_of(s, c, f, true);
    if (!req) return;
    s.deps().ctx->engine->save_lane(int(req->slot), req->name, answer_on_loop<core::LaneOpResult>(s, c, f,
        [](ControlServer& server, const ConnPtr& conn, const Frame& frame, const core::LaneOpResult& r) {
            LogFields fields; // journal: MESSAGE_ID snapshot-saved, NINFER_SLOT, NINFER_OP
            fields.slot = r.lane;
            fields.op = "slot-save";
            log_event(LogEvent::SnapshotSaved,
                      "ctl, slot save slot=" + std::to_string(r.lane) + " tokens=" + std::to_string(r.n_tokens) +
                          " bytes=" + std::to_string(r.bytes) + " via " + core::file_io_mode_name(r.mode),
                      fields);
            reply_slot(server, conn, frame, r);
        }));
}

// Restore: the engine's I/O worker reads and checks the file, then the engine loads it into the lane.
void handle_slot_restore(ControlServer& s, const ConnPtr& c, const Frame& f) {
    auto req = slot_request_of(s, c, f, true);
    if (!req) return;
    s.deps().ctx->engine->restore_lane(int(req->slot), req->name, answer_on_loop<core::LaneOpResult>(s, c, f, reply_slot));
}

void handle_slot_erase(ControlServer& s, const ConnPtr& c, const Frame& f) {
    auto req = slot_request_of(s, c, f, false);
    if (!req) return;
    s.deps().ctx->engine->erase_lane(int(req->slot), answer_on_loop<core::LaneOpResult>(s, c, f, reply_slot));
}

void handle_cache_list(ControlServer& s, const ConnPtr& c, const Frame& f) {
    s.deps().ctx->engine->list_cache(answer_on_loop<core::CacheListing>(s, c, f,
        [](ControlServer& server, const ConnPtr& conn, const Frame& frame, const core::CacheListing& listing) {
            proto::CacheListReply r;
            auto now = Clock::now();
            for (const core::SnapshotInfo& i : listing.entries)
                r.entries.push_back({core::prefix_key_hex(i.id), i.n_tokens, i.bytes, "host",
                                     uint64_t(std::chrono::duration_cast<std::chrono::seconds>(now - i.last_used).count()),
                                     i.hits});
            r.budget_bytes = listing.budget_bytes;
            r.used_bytes = listing.used_bytes;
            reply_ok(server, conn, frame, r);
        }));
}

void handle_cache_evict(ControlServer& s, const ConnPtr& c, const Frame& f) {
    auto req = payload_of<proto::CacheEvictRequest>(s, c, f);
    if (!req) return;
    core::CacheEvictRequest what;
    what.mode = req->mode == proto::CacheEvictMode::All         ? core::CacheEvictRequest::Mode::All
                : req->mode == proto::CacheEvictMode::OlderThan ? core::CacheEvictRequest::Mode::OlderThan
                                                                : core::CacheEvictRequest::Mode::Key;
    what.older_than_s = double(req->older_than_s);
    what.key = req->key;
    s.deps().ctx->engine->evict(std::move(what), answer_on_loop<core::CacheEvictResult>(s, c, f,
        [](ControlServer& server, const ConnPtr& conn, const Frame& frame, const core::CacheEvictResult& r) {
            reply_ok(server, conn, frame, proto::CountReply{r.count, r.bytes});
        }));
}

void handle_drain(ControlServer& s, const ConnPtr& c, const Frame& f) {
    s.deps().ctx->admission_paused = true;
    sd_notify(0, "STATUS=draining (ninferctl drain): new requests are refused");
    log_info("ctl, draining: admission stopped, running requests finish");
    if (s.deps().drained) s.deps().drained();
    s.reply(c, f, Status::Ok, {});
}

void handle_resume(ControlServer& s, const ConnPtr& c, const Frame& f) {
    DaemonContext& ctx = *s.deps().ctx;
    ctx.admission_paused = false;
    sd_notifyf(0, "STATUS=serving %s", ctx.model_id.c_str());
    log_info("ctl, resumed: admitting requests");
    s.reply(c, f, Status::Ok, {});
}

void handle_log_level(ControlServer& s, const ConnPtr& c, const Frame& f) {
    auto req = payload_of<proto::LogLevelRequest>(s, c, f);
    if (!req) return;
    const std::string& l = req->level;
    if (l != "debug" && l != "info" && l != "warning" && l != "error")
        return s.reply_error(c, f, Status::Invalid, "unknown log level '" + l + "' (debug, info, warning, error)");
    log_set_level(parse_log_level(l));
    log_info("ctl, log level " + req->level);
    s.reply(c, f, Status::Ok, {});
}

void handle_reload(ControlServer& s, const ConnPtr& c, const Frame& f) {
    s.deps().reload();
    s.reply(c, f, Status::Ok, {});
}

using Handler = void (*)(ControlServer&, const ConnPtr&, const Frame&);
struct OpEntry {
    proto::Op op;
    Handler handler;
    bool has_payload; // false: PROTOCOL.md says "empty", so any byte is a malformed request
};

constexpr OpEntry kOps[] = {
    {proto::Op::Status, handle_status, false},
    {proto::Op::Metrics, handle_metrics, false},
    {proto::Op::MetricsWatch, handle_metrics_watch, true},
    {proto::Op::SlotList, handle_slot_list, false},
    {proto::Op::SlotSave, handle_slot_save, true},
    {proto::Op::SlotRestore, handle_slot_restore, true},
    {proto::Op::SlotErase, handle_slot_erase, true},
    {proto::Op::CacheList, handle_cache_list, false},
    {proto::Op::CacheEvict, handle_cache_evict, true},
    {proto::Op::ArtifactUpgrade, handle_artifact_upgrade_op, true},
    {proto::Op::Drain, handle_drain, false},
    {proto::Op::Resume, handle_resume, false},
    {proto::Op::LogLevel, handle_log_level, true},
    {proto::Op::Reload, handle_reload, false},
    {proto::Op::Settings, handle_settings, false},
};

} // namespace

bool dispatch_control_op(ControlServer& server, const ControlServer::ConnPtr& c, const proto::Frame& frame) {
    for (const OpEntry& e : kOps)
        if (uint16_t(e.op) == frame.header.op) {
            if (!e.has_payload && !frame.payload.empty())
                server.reply_error(c, frame, Status::BadMessage,
                                   std::string(proto::op_name(frame.header.op)) + ": malformed payload (the request carries none)");
            else
                e.handler(server, c, frame);
            return true;
        }
    return false;
}

void ControlServer::start_watch(const ConnPtr& c, const proto::Frame& request, uint32_t interval_ms, uint32_t count) {
    if (c->watching) return reply_error(c, request, Status::Busy, "metrics-watch already running on this connection");
    c->watching = true;
    c->watch_left = count;
    c->watch_request = request;
    uv_timer_init(loop_, &c->watch_timer);
    c->watch_timer.data = new ConnPtr(c); // released by the timer's close callback
    auto tick = [](uv_timer_t* t) {
        ConnPtr conn = *static_cast<ConnPtr*>(t->data);
        ControlServer* self = conn->server;
        if (self->is_output_full(conn)) return; // a watcher that does not read: skip, never queue
        bool last = conn->watch_left == 1;
        self->reply(conn, conn->watch_request, Status::Ok, proto::encode_payload(metrics_of(*self->deps_.ctx)),
                    proto::kFlagMore);
        if (conn->watch_left > 0) --conn->watch_left;
        if (last) {
            self->reply(conn, conn->watch_request, Status::Ok, {}, proto::kFlagEnd);
            uv_timer_stop(t);
        }
    };
    uv_timer_start(&c->watch_timer, tick, 0, interval_ms);
}

} // namespace ninfer::daemon
