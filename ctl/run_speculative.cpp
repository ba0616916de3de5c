// ninfer::ctl - one generation through the scheduler's speculative rounds for `ninferctl run`.
#include "ctl/run_speculative.h"

#include "core/engine/scheduler.h"
#include "core/util/error.h"

#include <algorithm>
#include <cstdio>
#include <memory>

namespace ninfer::ctl {
namespace {

struct RunSink final : core::GenerationSink {
    std::function<void(int32_t)> on_token_fn;
    core::GenerationSummary summary;
    std::string rejected;
    bool done = false;
    core::TokenVerdict on_token(const core::DecodeResult& r) override {
        on_token_fn(r.token);
        return core::TokenVerdict::Continue;
    }
    void on_finished(const core::GenerationSummary& s) override { summary = s, done = true; }
    void on_rejected(core::RejectReason, const std::string& message) override { rejected = message, done = true; }
};

} // namespace

SpeculativeRun run_speculative(core::Backend& backend, const core::MemoryPlan& plan, std::vector<int32_t> prompt,
                               core::GenerationRequest request, const std::function<void(int32_t)>& on_token) {
    core::EngineStats stats;
    core::SchedulerOptions options;
    options.max_context = plan.max_context;
    options.kv_capacity_tokens = plan.kv_capacity_tokens;
    options.prefill_chunk = plan.prefill_chunk;
    options.speculative = request.speculative.value_or(core::SpeculativeConfig{});
    SpeculativeRun run;
    {
        core::Scheduler scheduler(backend, options, stats);
        auto sink = std::make_shared<RunSink>();
        sink->on_token_fn = on_token;
        const uint64_t room = plan.max_context > prompt.size() ? plan.max_context - prompt.size() : 0;
        request.max_tokens = uint32_t(std::min<uint64_t>(request.max_tokens, room));
        request.prompt = std::move(prompt);
        request.id = 1;
        request.sink = sink;
        scheduler.submit(std::move(request));
        while (!sink->done && scheduler.has_work()) scheduler.step();
        if (!sink->rejected.empty()) throw Error("run: " + sink->rejected);
        run.summary = sink->summary;
    }
    run.rounds = stats.n_spec_rounds_total;
    run.drafted = stats.n_spec_draft_tokens_total;
    run.accepted = stats.n_spec_accepted_tokens_total;
    return run;
}

std::string speculative_stats_line(const core::SpeculativeConfig& config, const SpeculativeRun& run) {
    char line[256];
    const double rate = run.drafted ? 100.0 * double(run.accepted) / double(run.drafted) : 0.0;
    // A round reports its accepted drafts and the token after them.
    const double per_round = run.rounds ? double(run.accepted + run.rounds) / double(run.rounds) : 0.0;
    std::snprintf(line, sizeof line, "speculative %s: %llu rounds, %llu drafted, %llu accepted (%.1f%%), %.2f tokens per round",
                  core::speculative_name(config).c_str(), static_cast<unsigned long long>(run.rounds),
                  static_cast<unsigned long long>(run.drafted), static_cast<unsigned long long>(run.accepted), rate,
                  per_round);
    return line;
}

} // namespace ninfer::ctl
