// ninfer::daemon - ninferd life cycle: plan, listen, load, serve, reload, drain, exit.
#include "daemon/server.h"

#include "core/convert/synthetic.h"
#include "core/util/error.h"
#include "daemon/control_server.h"
#include "daemon/journal.h"
#include "daemon/log.h"
#include "daemon/model_loader.h"
#include "daemon/monitor_history.h"
#include "daemon/routes.h"
#include "daemon/systemd_notify.h"

#include <systemd/sd-daemon.h>

#include <csignal>
#include <ctime>

namespace ninfer::daemon {
namespace {

core::SchedulerOptions scheduler_options_of(const DaemonConfig& c, const core::MemoryPlan& plan) {
    core::SchedulerOptions o;
    o.max_context = plan.max_context;
    o.kv_capacity_tokens = plan.kv_capacity_tokens;
    o.prefill_chunk = c.prefill_chunk;
    o.prefill_chunk_decoding = c.prefill_chunk_decoding;
    o.prefill_slice_layers = c.prefill_slice_layers;
    o.max_pending = c.max_pending;
    o.pending_timeout_ms = c.pending_timeout_ms;
    o.speculative = core::parse_speculative(c.speculative);
    o.speculation_policy = {c.speculative_max_lanes, float(c.speculative_min_acceptance), true};
    return o;
}

// The engine's lane state: the prefix cache (host-cache-mib), slot files under state-dir.
core::LaneStateOptions lane_state_options_of(const DaemonConfig& c, const PlannedModel& model) {
    core::LaneStateOptions o;
    o.host_cache_bytes = c.host_cache_mib << 20;
    o.identity.artifact_id = core::artifact_id_from_hex(model.artifact->artifact_id_hex());
    o.identity.model_id = model.model_id;
    o.identity.kv_dtype = model.plan.kv_dtype;
    o.identity.page_tokens = core::kKvPageTokens;
    o.identity.kv_bytes_per_token = model.plan.kv_bytes_per_token;
    o.identity.gdn_bytes = model.plan.lane_image_gdn_bytes();
    o.identity.max_context = model.plan.max_context;
    o.slots_dir = c.state_dir + "/slots";
    o.lanes_dir = c.state_dir + "/lanes";
    o.note = [](const std::string& m) { log_info(m); };
    o.warn = [](const std::string& m) { log_warning(m); };
    return o;
}

// The socket systemd passed under FileDescriptorName=http, or -1.
int activated_http_fd() {
    char** names = nullptr;
    int n = sd_listen_fds_with_names(0, &names); // keep $LISTEN_FDS: the control socket reads it too
    int fd = -1;
    for (int i = 0; i < n; ++i) {
        if (fd < 0 && names && std::string_view(names[i]) == "http" &&
            sd_is_socket_inet(SD_LISTEN_FDS_START + i, 0, SOCK_STREAM, 1, 0) > 0)
            fd = SD_LISTEN_FDS_START + i;
        if (names) free(names[i]);
    }
    free(names);
    return fd;
}

class Daemon {
  public:
    Daemon(const CommandLine& cli, Settings settings, DaemonConfig config, PlannedModel model)
        : cli_(cli), model_(std::move(model)),
          engine_(scheduler_options_of(config, model_.plan), lane_state_options_of(config, model_)) {
        uv_loop_init(&loop_);
        ctx_.config = std::move(config);
        ctx_.settings = std::move(settings);
        ctx_.model_id = model_.model_id;
        ctx_.synthetic_weights = model_.artifact->is_synthetic();
        ctx_.device_in_use = resolved_device(ctx_.config.device);
        bool fallback = false;
        const std::string choice = device_choice_line(ctx_.config.device, fallback);
        fallback ? log_warning("backend, " + choice) : log_info("backend, " + choice);
        ctx_.loop = &loop_;
        ctx_.engine = &engine_;
        ctx_.created_unix = int64_t(std::time(nullptr));
        ctx_.on_session_end = [this] {
            maybe_finish_drain();
            maybe_persist_drained();
        };
    }

    int run() {
        bridge_ = std::make_unique<LoopBridge>(&loop_);
        ctx_.bridge = bridge_.get();
        server_ = std::make_unique<HttpServer>(&loop_, http_limits_of(ctx_.config),
                                               [this](HttpRequest&& r, std::shared_ptr<ResponseWriter> w) {
                                                   dispatch(ctx_, r, std::move(w));
                                               });
        server_->on_response([this](int status) { ++ctx_.counters.http_responses_by_status[status]; });
        ctx_.http = server_.get();
        bridge_->set_batch_hooks([this] { server_->cork(); }, [this] { server_->uncork(); });
        try {
            int fd = activated_http_fd();
            if (fd >= 0) server_->listen_fd(fd);
            else server_->listen(ctx_.config.host, ctx_.config.port);
        } catch (const Error& e) {
            log_error(e.what());
            close_loop();
            return 1;
        }
        log_info("http, listening on " + ctx_.config.host + ":" + std::to_string(server_->bound_port()));
        std::fprintf(stderr, "ninferd: listening on %s:%d\n", ctx_.config.host.c_str(), server_->bound_port());
        ControlDeps deps{&ctx_, &model_, [this] { reload(); }, [this] { on_control_drain(); }};
        control_ = std::make_unique<ControlServer>(&loop_, std::move(deps));
        if (std::string why = control_->start(); !why.empty()) log_warning(why + "; ninferctl cannot reach this daemon");
        sd_notify(0, "STATUS=loading the model");
        notifier_.start_loading(ctx_.config.artifact_path);
        install_signals();
        start_history_sampler();
        start_engine();
        uv_run(&loop_, UV_RUN_DEFAULT);
        engine_.stop();
        close_loop();
        return exit_code_;
    }

  private:
    // Closes every handle and runs their close callbacks (which free the connections), then the
    // loop itself, while the objects owning the handles still exist: nothing is left for LSan.
    void close_loop() {
        server_->stop_accepting();
        server_->close_all();
        if (control_) control_->close();
        bridge_->close();
        notifier_.stop();
        uv_walk(&loop_, [](uv_handle_t* h, void*) { // the signals and the daemon's own timers
            if (!uv_is_closing(h)) uv_close(h, nullptr);
        }, nullptr);
        uv_run(&loop_, UV_RUN_DEFAULT);
        if (int rc = uv_loop_close(&loop_); rc != 0)
            log_warning(std::string("server, the event loop did not close: ") + uv_strerror(rc));
    }

    // /monitor/history: one reading of the figures a second, on this (the loop) thread. Unreferenced:
    // the timer alone never keeps the loop running.
    void start_history_sampler() {
        ctx_.monitor_history = std::make_shared<MonitorHistory>();
        uv_timer_init(&loop_, &history_timer_);
        history_timer_.data = this;
        uv_timer_start(&history_timer_, [](uv_timer_t* t) {
            auto* self = static_cast<Daemon*>(t->data);
            self->ctx_.monitor_history->record(read_history(self->ctx_));
        }, 0, kHistoryPeriodMs);
        uv_unref(reinterpret_cast<uv_handle_t*>(&history_timer_));
    }

    void start_engine() {
        auto frontend_slot = std::make_shared<std::shared_ptr<ModelFrontend>>();
        engine_.start(
            [this, frontend_slot]() {
                *frontend_slot = ModelFrontend::from_artifact(*model_.artifact);
                auto media = std::make_shared<MediaInput>(*model_.artifact, ctx_.config);
                media->set_on_decoded([this](uint64_t items, uint64_t us) { engine_.count_media_decoded(items, us); });
                (*frontend_slot)->set_media(std::move(media));
                auto backend = load_backend(ctx_.config, model_, **frontend_slot);
                engine_.set_vision_encoder(model_.vision.get());
                return backend;
            },
            [this, frontend_slot](core::EngineState state, const std::string& why) {
                bridge_->post([this, frontend_slot, state, why] { on_engine_state(state, why, *frontend_slot); });
            });
    }

    void on_engine_state(core::EngineState state, const std::string& why, std::shared_ptr<ModelFrontend> frontend) {
        if (state == core::EngineState::Ready && ctx_.config.persist_slots) {
            sd_notify(0, "STATUS=restoring the lanes of the last run");
            return engine_.restore_all(on_loop([this, frontend](const core::LanesSummary& summary) {
                log_info(summary.describe("restored"));
                on_ready(frontend);
            }));
        }
        if (state == core::EngineState::Ready) return on_ready(std::move(frontend));
        bool during_load = ctx_.frontend == nullptr;
        ctx_.failure = why;
        if (ctx_.state != ServeState::Draining) ctx_.state = ServeState::Failed;
        if (during_load) {
            log_error("engine, failed: " + why);
            exit_code_ = 1;
            return shutdown();
        }
        // A backend that failed while serving (a CUDA error) leaves the device's state unknown:
        // the requests it ran already have their error events (queued on this loop before this
        // one); exit non-zero once they are written, so the service manager (Restart=on-failure)
        // starts a fresh process instead of one that answers 503 until someone notices.
        log_event(LogEvent::EngineFailed,
                  "engine, failed: " + why + "; exiting with status " + std::to_string(kExitEngineFailed) +
                      " so that the service manager restarts ninferd" +
                      (ctx_.config.persist_slots ? " (the lanes are saved from their host checkpoints first)" : ""));
        sd_notify(0, ("STATUS=the engine failed: " + why).c_str());
        exit_code_ = kExitEngineFailed;
        shutdown();
    }

    // --persist-slots (<state-dir>/lanes): the engine saves or restores every lane; the summary
    // comes back to the loop thread.
    std::function<void(core::LanesSummary)> on_loop(std::function<void(const core::LanesSummary&)> fn) {
        return [this, fn](core::LanesSummary summary) { bridge_->post([fn, summary] { fn(summary); }); };
    }

    void on_ready(std::shared_ptr<ModelFrontend> frontend) {
        ctx_.frontend = std::move(frontend);
        engine_.set_assistant_marker(ctx_.frontend->assistant_marker());
        if (ctx_.state == ServeState::Loading) ctx_.state = ServeState::Ready;
        log_event(LogEvent::ModelLoaded, "engine, ready: " + ctx_.model_id + ", " + model_.plan.describe());
        sd_notifyf(0, "READY=1\nSTATUS=serving %s on %s:%d", ctx_.model_id.c_str(), ctx_.config.host.c_str(),
                   server_->bound_port());
        notifier_.start_watchdog();
    }

    void install_signals() {
        for (auto* s : {&sigterm_, &sigint_, &sighup_}) {
            uv_signal_init(&loop_, s);
            s->data = this;
        }
        uv_signal_start(&sigterm_, [](uv_signal_t* s, int) { static_cast<Daemon*>(s->data)->begin_drain(); }, SIGTERM);
        uv_signal_start(&sigint_, [](uv_signal_t* s, int) { static_cast<Daemon*>(s->data)->begin_drain(); }, SIGINT);
        uv_signal_start(&sighup_, [](uv_signal_t* s, int) { static_cast<Daemon*>(s->data)->reload(); }, SIGHUP);
        std::signal(SIGPIPE, SIG_IGN);
    }

    // SIGHUP and `ninferctl reload`: the table says what is applied (config_load.h apply_reload);
    // here the applied values reach the consumers that copied them (log level, HTTP limits).
    void reload() {
        sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu", static_cast<unsigned long long>(uv_hrtime() / 1000));
        try {
            ReloadResult r = apply_reload(ctx_.config, ctx_.settings, load_settings(cli_));
            for (const OptionChange& change : r.needs_restart)
                log_warning("config, " + change.describe() + ": needs a restart, still running with the value read at start");
            log_set_level(parse_log_level(ctx_.config.log_level));
            server_->set_limits(http_limits_of(ctx_.config));
            std::string applied;
            for (const OptionChange& change : r.applied) applied += (applied.empty() ? ": " : ", ") + change.describe();
            log_event(LogEvent::ConfigReloaded, "config, reloaded" + applied);
        } catch (const Error& e) {
            log_error(std::string("config, reload refused, keeping the running settings: ") + e.what());
        }
        sd_notify(0, "READY=1");
    }

    void begin_drain() {
        if (ctx_.state == ServeState::Draining) return;
        ctx_.state = ServeState::Draining;
        sd_notify(0, "STOPPING=1\nSTATUS=draining");
        log_info("server, draining " + std::to_string(ctx_.sessions.size()) + " requests (deadline " +
                 std::to_string(ctx_.config.drain_timeout_s) + " s)");
        uv_timer_init(&loop_, &drain_timer_);
        drain_timer_.data = this;
        uv_timer_start(&drain_timer_, [](uv_timer_t* t) {
            auto* self = static_cast<Daemon*>(t->data);
            log_warning("server, drain deadline passed: cancelling " + std::to_string(self->ctx_.sessions.size()) +
                        " requests");
            self->engine_.cancel_all();
        }, uint64_t(ctx_.config.drain_timeout_s) * 1000, 0);
        maybe_finish_drain();
    }

    // `ninferctl drain` with --persist-slots: once the running requests are done the lanes are
    // saved, so a stop that follows (even SIGKILL) loses no conversation's context.
    void on_control_drain() {
        persist_when_drained_ = ctx_.config.persist_slots;
        maybe_persist_drained();
    }

    void maybe_persist_drained() {
        if (!persist_when_drained_ || !ctx_.admission_paused || !ctx_.sessions.empty() || !ctx_.frontend) return;
        persist_when_drained_ = false;
        engine_.persist_all(on_loop([](const core::LanesSummary& s) { log_info(s.describe("saved") + " (drained)"); }));
    }

    void maybe_finish_drain() {
        if (ctx_.state == ServeState::Draining && ctx_.sessions.empty()) shutdown();
    }

    // Waits (polling every 10 ms, at most 2 s) until every response byte left the process.
    void shutdown() {
        if (shutting_down_) return;
        shutting_down_ = true;
        notifier_.stop();
        server_->stop_accepting();
        if (control_) control_->close();
        if (ctx_.config.persist_slots && ctx_.frontend) {
            persisting_ = true; // the loop stops only once every lane is on disk
            const bool failed = !ctx_.failure.empty();
            auto saved = on_loop([this, failed](const core::LanesSummary& summary) {
                log_info(summary.describe(failed ? "saved from host checkpoints" : "saved"));
                persisting_ = false;
            });
            // A failed engine's device is not read: the lanes' host checkpoints are saved instead.
            if (failed)
                engine_.persist_checkpoints(std::move(saved));
            else
                engine_.persist_all(std::move(saved));
        }
        uv_timer_init(&loop_, &flush_timer_);
        flush_timer_.data = this;
        flush_started_ = uv_now(&loop_);
        uv_timer_start(&flush_timer_, [](uv_timer_t* t) {
            auto* self = static_cast<Daemon*>(t->data);
            bool flushed = !self->server_->has_pending_writes() || uv_now(&self->loop_) - self->flush_started_ > 2000;
            if (flushed && !self->persisting_) {
                self->server_->close_all();
                log_info("server, stopped");
                uv_stop(&self->loop_);
            }
        }, 10, 10);
    }

    const CommandLine& cli_;
    PlannedModel model_;
    core::Engine engine_;
    uv_loop_t loop_{};
    DaemonContext ctx_;
    ServiceNotifier notifier_{ctx_};
    std::unique_ptr<LoopBridge> bridge_;
    std::unique_ptr<HttpServer> server_;
    std::unique_ptr<ControlServer> control_;
    uv_signal_t sigterm_{}, sigint_{}, sighup_{};
    uv_timer_t drain_timer_{}, flush_timer_{}, history_timer_{};
    uint64_t flush_started_ = 0;
    bool shutting_down_ = false, persisting_ = false, persist_when_drained_ = false;
    int exit_code_ = 0;
};

} // namespace

int run_daemon(const CommandLine& cli) {
    DaemonConfig config;
    Settings settings;
    try {
        settings = load_settings(cli);
        config = to_daemon_config(settings);
    } catch (const Error& e) {
        std::fprintf(stderr, "ninferd: %s\n", e.what());
        return 2;
    }
    log_init(parse_log_level(config.log_level));
    PlannedModel model;
    try {
        model = plan_model(config);
    } catch (const Error& e) {
        log_error(std::string("refusing to start: ") + e.what());
        return 1;
    }
    std::string warning = core::warn_if_synthetic(*model.artifact);
    if (!warning.empty() && log_is_journal()) log_warning(warning);
    if (!warning.empty()) // the packaged demo: say how to serve a real model (ninferd.conf(5))
        log_warning("model, to serve a real model convert it with `ninferctl convert` and set `artifact = PATH` "
                    "in /etc/ninfer/ninferd.conf.d/50-local.conf");
    if (!model.max_context_choice.empty()) log_info("plan, " + model.max_context_choice);
    config.max_context = model.plan.max_context; // auto resolved: what requests, /v1/models and /props see
    if (!model.speculative_choice.empty()) log_info("plan, " + model.speculative_choice);
    config.speculative = model.speculative; // auto resolved: what requests may lower, /metrics and status show
    log_info("model, " + model.model_id + ": " + model.plan.describe());
    Daemon daemon(cli, std::move(settings), std::move(config), std::move(model));
    return daemon.run();
}

} // namespace ninfer::daemon
