// ninfer::core - the engine thread: owns the backend and the scheduler, fed by a typed inbox.
//
// Contract:
// - start(loader, on_state) spawns the thread, which calls loader() to build the Backend (the
//   slow weight load happens there, never on the loop thread), then reports
//   EngineState::Ready, or EngineState::Failed with the error text, through on_state (called on
//   the engine thread; the caller forwards it to its loop with uv_async_t).
// - submit / cancel / cancel_all / stop are thread-safe: they post a typed task and wake the
//   thread. Tasks are handled between scheduler steps, so a cancel frees its lane within a step.
//   Requests submitted before Ready wait; after Failed or stop() they are rejected Unavailable.
// - Sinks are called on the engine thread (see generation.h). An exception escaping a backend
//   call marks the engine Failed: running requests end with FinishReason::Failed, queued ones are
//   rejected RejectReason::Unavailable ("the engine failed: ..."), and so is every later one.
// - stats() are atomics any thread may read. ~Engine stops and joins.
#pragma once

#include "core/backend/backend.h"
#include "core/engine/engine_stats.h"
#include "core/engine/generation.h"
#include "core/engine/scheduler.h"

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>

namespace ninfer::core {

enum class EngineState : uint8_t { Loading, Ready, Failed, Stopped };

class Engine {
  public:
    using Loader = std::function<std::unique_ptr<Backend>()>;
    using StateCallback = std::function<void(EngineState, const std::string&)>;

    explicit Engine(SchedulerOptions options);
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    void start(Loader loader, StateCallback on_state);
    void submit(GenerationRequest request);
    void cancel(uint64_t request_id);
    void cancel_all();
    void stop(); // finishes nothing: running requests are cancelled; joins the thread
    // Runs fn on the engine thread between steps (slot and cache ops of the control plane). fn gets
    // nullptr while no scheduler exists (load failed); it must not throw.
    void post_admin(std::function<void(Scheduler*)> fn);

    const EngineStats& stats() const { return stats_; }
    EngineState state() const { return state_.load(); }

  private:
    struct SubmitTask { GenerationRequest request; };
    struct CancelTask { uint64_t request_id; };
    struct CancelAllTask {};
    struct StopTask {};
    struct AdminTask { std::function<void(Scheduler*)> run; };
    using Task = std::variant<SubmitTask, CancelTask, CancelAllTask, StopTask, AdminTask>;

    void post(Task task);
    void run(Loader loader, StateCallback on_state);
    bool handle(Task& task); // false on StopTask
    void reject_all_pending();

    SchedulerOptions options_;
    EngineStats stats_;
    std::atomic<EngineState> state_{EngineState::Loading};
    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<Task> inbox_;
    std::unique_ptr<Backend> backend_;
    std::unique_ptr<Scheduler> scheduler_;
    std::deque<GenerationRequest> early_; // submitted while loading
    std::thread thread_;
};

} // namespace ninfer::core
