// ninfer::core - engine thread: load the backend, then loop over inbox tasks and scheduler steps.
#include "core/engine/engine.h"

#include "core/engine/fault_injection.h"

#include <cstdlib>
#include <exception>

namespace ninfer::core {

Engine::Engine(SchedulerOptions options, LaneStateOptions lanes) : options_(options), lane_state_(std::move(lanes)) {
    if (lane_state_.host_cache_bytes > 0) {
        SnapshotStoreOptions o;
        o.host_budget_bytes = lane_state_.host_cache_bytes;
        o.warn = lane_state_.warn;
        cache_ = std::make_unique<PrefixCache>(std::move(o));
        options_.prefix_cache = cache_.get();
    }
    if (!lane_state_.slots_dir.empty())
        io_.post([this] {
            if (size_t n = remove_stale_temps(lane_state_.slots_dir, ".nslot"); n && lane_state_.note)
                lane_state_.note("slots, removed " + std::to_string(n) + " unfinished slot file(s) of an earlier crash");
        });
}

Engine::~Engine() { stop(); }

void Engine::start(Loader loader, StateCallback on_state) {
    thread_ = std::thread([this, loader = std::move(loader), on_state = std::move(on_state)]() mutable {
        run(std::move(loader), std::move(on_state));
    });
}

void Engine::post(Task task) {
    {
        std::lock_guard lock(mutex_);
        inbox_.push_back(std::move(task));
    }
    wake_.notify_one();
}

void Engine::submit(GenerationRequest request) { post(SubmitTask{std::move(request)}); }
void Engine::cancel(uint64_t request_id) { post(CancelTask{request_id}); }
void Engine::cancel_all() { post(CancelAllTask{}); }
void Engine::post_admin(std::function<void(Scheduler*)> fn) { post(AdminTask{std::move(fn)}); }

void Engine::stop() {
    if (!thread_.joinable()) return;
    post(StopTask{});
    thread_.join();
}

bool Engine::handle(Task& task) {
    if (std::holds_alternative<StopTask>(task)) return false;
    bool ready = scheduler_ != nullptr;
    if (auto* s = std::get_if<SubmitTask>(&task)) {
        if (ready) {
            scheduler_->submit(std::move(s->request));
        } else if (state_ == EngineState::Loading) {
            early_.push_back(std::move(s->request));
        } else {
            ++stats_.n_requests_rejected_total;
            s->request.sink->on_rejected(RejectReason::Unavailable, unavailable_reason());
        }
    } else if (auto* c = std::get_if<CancelTask>(&task)) {
        if (ready) scheduler_->cancel(c->request_id);
        for (auto it = early_.begin(); it != early_.end(); ++it) {
            if (it->id != c->request_id) continue;
            GenerationSummary summary;
            summary.reason = FinishReason::Cancelled;
            auto sink = it->sink;
            early_.erase(it);
            sink->on_finished(summary);
            break;
        }
    } else if (std::holds_alternative<CancelAllTask>(task)) {
        if (ready) scheduler_->cancel_all();
    } else if (auto* a = std::get_if<AdminTask>(&task)) {
        a->run(scheduler_.get());
    }
    return true;
}

void Engine::reject_all_pending() {
    for (GenerationRequest& r : early_) r.sink->on_rejected(RejectReason::Unavailable, unavailable_reason());
    early_.clear();
}

std::string Engine::unavailable_reason() const {
    return failure_.empty() ? "engine unavailable" : "the engine failed: " + failure_;
}

void Engine::run(Loader loader, StateCallback on_state) {
    EngineFault fault(0);
    try {
        fault = EngineFault(engine_fault_step(std::getenv("NINFER_FAULT")));
        backend_ = loader();
        scheduler_ = std::make_unique<Scheduler>(*backend_, options_, stats_);
        state_ = EngineState::Ready;
        on_state(EngineState::Ready, "");
    } catch (const std::exception& e) {
        failure_ = e.what();
        state_ = EngineState::Failed;
        on_state(EngineState::Failed, e.what());
    }
    if (fault.armed() && scheduler_ && lane_state_.warn)
        lane_state_.warn("engine, " + fault.describe() + " is set: the backend fails before that step with work "
                         "(a test-only fault injection)");
    bool running = true;
    while (running) {
        std::deque<Task> tasks;
        {
            std::unique_lock lock(mutex_);
            bool idle = !scheduler_ || !scheduler_->has_work();
            if (idle && inbox_.empty()) {
                auto deadline = scheduler_ ? scheduler_->next_deadline() : std::nullopt;
                if (deadline) {
                    wake_.wait_until(lock, *deadline, [&] { return !inbox_.empty(); });
                } else {
                    wake_.wait(lock, [&] { return !inbox_.empty(); });
                }
            }
            tasks.swap(inbox_);
        }
        if (scheduler_)
            while (!early_.empty()) {
                scheduler_->submit(std::move(early_.front()));
                early_.pop_front();
            }
        else if (state_ == EngineState::Failed)
            reject_all_pending();
        for (Task& t : tasks) running = running && handle(t);
        if (!running || !scheduler_) continue;
        try {
            if (fault.armed() && scheduler_->has_work() && fault.count_step()) backend_->inject_fault(fault.describe());
            scheduler_->step();
        } catch (const std::exception& e) {
            // A backend failure leaves lane state unknown: fail what is running and stop serving.
            failure_ = e.what();
            state_ = EngineState::Failed;
            failed_lanes_ = scheduler_->lane_sequences();
            scheduler_->fail_all(e.what());
            scheduler_.reset();
            on_state(EngineState::Failed, e.what());
        }
    }
    if (scheduler_) scheduler_->cancel_all();
    reject_all_pending();
    state_ = EngineState::Stopped;
}

} // namespace ninfer::core
