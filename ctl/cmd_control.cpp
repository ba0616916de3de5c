// ninfer::ctl - `ninferctl status [--settings] | metrics | drain | resume | log-level | reload` over the control socket.
#include "core/util/json_writer.h"
#include "ctl/command_list.h"
#include "ctl/control_common.h"
#include "ctl/run_speculative.h"

#include <cstdio>
#include <unistd.h>

namespace ninfer::ctl {
namespace {

using core::JsonWriter;
using proto::Op;

void need_args(const ControlArgs& a, size_t n) {
    if (a.positional.size() != n)
        throw UsageError(n == 0 ? "unexpected argument '" + a.positional.front() + "'" : "wrong number of arguments");
}

void print_status_json(const proto::StatusReply& s) {
    JsonWriter w;
    w.begin_object().member("version", s.version).member("model_id", s.model_id).member("artifact", s.artifact);
    w.member("device", s.device).member("synthetic", s.synthetic).member("draining", s.draining);
    w.member("uptime_s", s.uptime_s).member("queue_length", uint64_t(s.queue_length));
    w.member("max_pending", uint64_t(s.max_pending));
    w.key("lanes").begin_array();
    for (const proto::LaneInfo& l : s.lanes)
        w.begin_object().member("id", uint64_t(l.id)).member("state", l.state).member("tokens", l.n_tokens).end_object();
    w.end_array();
    const proto::MemoryPlanInfo& m = s.memory_plan;
    w.key("memory_plan").begin_object().member("weights_bytes", m.weights_bytes).member("kv_pool_bytes", m.kv_pool_bytes);
    w.member("kv_capacity_tokens", m.kv_capacity_tokens).member("state_slots_bytes", m.state_slots_bytes);
    w.member("workspace_bytes", m.workspace_bytes).member("host_store_bytes", m.host_store_bytes).end_object();
    w.key("speculative").begin_object().member("setting", s.speculative).member("rounds", s.spec_rounds);
    w.member("draft_tokens", s.spec_draft_tokens).member("accepted_tokens", s.spec_accepted_tokens).end_object();
    std::printf("%s\n", w.end_object().take().c_str());
}

void print_status_table(const proto::StatusReply& s) {
    std::printf("model_id    %s%s\n", s.model_id.c_str(), s.synthetic ? " (synthetic weights)" : "");
    std::printf("artifact    %s\n", s.artifact.c_str());
    if (s.synthetic) // the packaged demo: say how to serve a real model (ninferd.conf(5))
        std::printf("note        the weights are random, answers are noise: convert a model with `ninferctl convert`\n"
                    "            and set `artifact = PATH` in /etc/ninfer/ninferd.conf.d/50-local.conf\n");
    std::printf("device      %s\n", s.device.c_str());
    std::printf("version     %s\n", s.version.c_str());
    std::printf("uptime      %llu s\n", static_cast<unsigned long long>(s.uptime_s));
    std::printf("admission   %s\n", s.draining ? "draining (new requests refused)" : "open");
    std::printf("queue       %u waiting (max %u)\n", s.queue_length, s.max_pending);
    const proto::MemoryPlanInfo& m = s.memory_plan;
    std::printf("memory_plan weights %s, KV pool %s (%llu tokens), state slots %s, workspace %s, host store %s\n",
                format_bytes(m.weights_bytes).c_str(), format_bytes(m.kv_pool_bytes).c_str(),
                static_cast<unsigned long long>(m.kv_capacity_tokens), format_bytes(m.state_slots_bytes).c_str(),
                format_bytes(m.workspace_bytes).c_str(), format_bytes(m.host_store_bytes).c_str());
    const core::SpeculativeConfig spec = core::parse_speculative(s.speculative.empty() ? "off" : s.speculative);
    SpeculativeRun run;
    run.rounds = s.spec_rounds, run.drafted = s.spec_draft_tokens, run.accepted = s.spec_accepted_tokens;
    std::printf("%s\n", spec.on() ? speculative_stats_line(spec, run).c_str() : "speculative off");
    std::printf("\nLANE  STATE     TOKENS\n");
    for (const proto::LaneInfo& l : s.lanes)
        std::printf("%4u  %-8s  %6llu\n", l.id, l.state.c_str(), static_cast<unsigned long long>(l.n_tokens));
}

// `status --settings`: config-file syntax (paste-able), defaults and SIGHUP-reloadable ones marked.
void print_settings(const proto::SettingsReply& r, bool json) {
    if (json) {
        JsonWriter w;
        w.begin_array();
        for (const proto::SettingInfo& s : r.settings)
            w.begin_object().member("name", s.name).member("value", s.value).member("is_default", s.is_default)
                .member("is_reloadable", s.is_reloadable).end_object();
        std::printf("%s\n", w.end_array().take().c_str());
        return;
    }
    for (const proto::SettingInfo& s : r.settings) {
        std::string line = s.name + " = " + s.value;
        std::string note = std::string(s.is_default ? "default" : "set") + (s.is_reloadable ? ", SIGHUP" : "");
        std::printf("%-50s # %s\n", line.c_str(), note.c_str());
    }
}

std::string metrics_json(const proto::MetricsReply& m) {
    JsonWriter w;
    w.begin_object().member("requests_total", m.requests_total).member("requests_failed", m.requests_failed);
    w.member("prompt_tokens_total", m.prompt_tokens_total).member("generated_tokens_total", m.generated_tokens_total);
    w.member("cached_tokens_total", m.cached_tokens_total).member("prompt_tokens_per_s", m.prompt_tokens_per_s);
    w.member("generated_tokens_per_s", m.generated_tokens_per_s).member("ttft_ms_mean", m.ttft_ms_mean);
    w.member("queue_length", uint64_t(m.queue_length)).member("lanes_busy", uint64_t(m.lanes_busy));
    w.member("kv_used_tokens", m.kv_used_tokens).member("kv_capacity_tokens", m.kv_capacity_tokens);
    w.member("cache_hits", m.cache_hits).member("cache_misses", m.cache_misses);
    return w.end_object().take();
}

void print_metrics_table(const proto::MetricsReply& m) {
    auto u = [](uint64_t v) { return static_cast<unsigned long long>(v); };
    std::printf("requests        %llu total, %llu failed\n", u(m.requests_total), u(m.requests_failed));
    std::printf("throughput      prompt %.1f tok/s, generated %.1f tok/s\n", m.prompt_tokens_per_s,
                m.generated_tokens_per_s);
    std::printf("ttft            %.1f ms mean\n", m.ttft_ms_mean);
    std::printf("queue           %u waiting, %u lanes busy\n", m.queue_length, m.lanes_busy);
    std::printf("kv              %llu of %llu tokens reserved\n", u(m.kv_used_tokens), u(m.kv_capacity_tokens));
    std::printf("prefix cache    %llu hits, %llu misses, %llu cached prompt tokens\n", u(m.cache_hits),
                u(m.cache_misses), u(m.cached_tokens_total));
    std::printf("tokens          %llu prompt, %llu generated\n", u(m.prompt_tokens_total), u(m.generated_tokens_total));
}

int watch_metrics(const ControlArgs& a, uint64_t seconds) {
    proto::Client client = connect_daemon(a.options);
    proto::MetricsWatchRequest req;
    req.interval_ms = uint32_t(seconds * 1000);
    client.set_timeout_ms(int(req.interval_ms + a.options.timeout_s * 1000));
    client.send(Op::MetricsWatch, proto::encode_payload(req));
    bool tty = !a.options.json && ::isatty(STDOUT_FILENO);
    for (;;) {
        proto::Frame f = client.receive();
        if (f.header.flags & proto::kFlagEnd) return 0;
        std::optional<proto::MetricsReply> m = proto::decode_payload<proto::MetricsReply>(f.payload);
        if (!m) throw proto::ClientError(proto::ClientError::Kind::Protocol, "malformed metrics frame");
        if (a.options.json) {
            std::printf("%s\n", metrics_json(*m).c_str());
        } else {
            if (tty) std::printf("\033[H\033[2J"); // redraw in place
            print_metrics_table(*m);
            if (!tty) std::printf("\n");
        }
        std::fflush(stdout);
    }
}

// Commands whose request and reply carry nothing: they either succeed or say why not.
int simple_admin(int argc, char** argv, const char* usage, Op op, const char* done) {
    return run_control(argc, argv, usage, [&](ControlArgs& a) {
        need_args(a, 0);
        proto::Client client = connect_daemon(a.options);
        client.call(op, {});
        if (a.options.json) std::printf("{\"ok\":true}\n");
        else std::printf("%s\n", done);
        return 0;
    });
}

} // namespace

int cmd_status(int argc, char** argv) {
    return run_control(argc, argv, "ninferctl status [--settings] [--json]", [](ControlArgs& a) {
        if (!a.positional.empty() && a.positional[0] == "--settings") {
            need_args(a, 1);
            proto::Client client = connect_daemon(a.options);
            print_settings(call_daemon<proto::SettingsReply>(client, Op::Settings, {}), a.options.json);
            return 0;
        }
        if (!a.positional.empty()) need_args(a, 0);
        proto::Client client = connect_daemon(a.options);
        auto s = call_daemon<proto::StatusReply>(client, Op::Status, {});
        a.options.json ? print_status_json(s) : print_status_table(s);
        return 0;
    });
}

int cmd_metrics(int argc, char** argv) {
    return run_control(argc, argv, "ninferctl metrics [--watch SECONDS] [--json]", [](ControlArgs& a) {
        if (!a.positional.empty() && a.positional[0] == "--watch") {
            need_args(a, 2);
            uint64_t s = parse_seconds_arg(a.positional[1], "--watch");
            if (s == 0) throw UsageError("--watch wants at least 1 second");
            return watch_metrics(a, s);
        }
        if (!a.positional.empty()) need_args(a, 0);
        proto::Client client = connect_daemon(a.options);
        auto m = call_daemon<proto::MetricsReply>(client, Op::Metrics, {});
        if (a.options.json) std::printf("%s\n", metrics_json(m).c_str());
        else print_metrics_table(m);
        return 0;
    });
}

int cmd_drain(int argc, char** argv) {
    return simple_admin(argc, argv, "ninferctl drain", Op::Drain, "draining: new requests are refused, running ones finish");
}

int cmd_resume(int argc, char** argv) {
    return simple_admin(argc, argv, "ninferctl resume", Op::Resume, "resumed: admitting requests");
}

int cmd_reload(int argc, char** argv) {
    return simple_admin(argc, argv, "ninferctl reload", Op::Reload, "configuration reloaded");
}

int cmd_log_level(int argc, char** argv) {
    return run_control(argc, argv, "ninferctl log-level debug|info|warning|error", [](ControlArgs& a) {
        need_args(a, 1);
        proto::LogLevelRequest req{a.positional[0]};
        proto::Client client = connect_daemon(a.options);
        client.call(Op::LogLevel, proto::encode_payload(req));
        if (a.options.json) std::printf("{\"ok\":true,\"level\":%s}\n", core::json_quote(req.level).c_str());
        else std::printf("log level set to %s\n", req.level.c_str());
        return 0;
    });
}

} // namespace ninfer::ctl
