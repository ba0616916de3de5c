// ninfer::core - the engine thread: owns the backend, the scheduler and all lane state (the prefix
// cache and its snapshot store, the I/O worker, slot files), fed by a typed inbox.
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
//   NINFER_FAULT=engine_step:N (test-only, fault_injection.h) makes the backend fail that way at
//   its N-th step with work; a malformed value fails the load.
// - Lane state (engine_lanes.cpp; options in lane_ops.h): save_lane / restore_lane / erase_lane
//   (`ninferctl slot ...`, files slots_dir/NAME.nslot), evict / list_cache (the prefix cache),
//   persist_all / restore_all (--persist-slots, lanes_dir/lane-N.nslot, one lane image in memory
//   at a time; a lane that holds nothing has its file removed; a refused file or lane is counted
//   failed, warned about, and the lane stays empty and usable). Each runs its chain inside the
//   engine: the engine thread copies or loads a lane between steps, the I/O thread reads or
//   writes the file. All are thread-safe; `done` is called exactly once, on the engine or the I/O
//   thread, and must only hand the result on (never block). NAME must be a valid slot name
//   (proto::is_valid_slot_name, checked by the caller). After Failed every op reports
//   Errc::Unavailable; after stop() none reports. post_io runs another file job (artifact
//   upgrade) on the same I/O thread, in order with slot files.
// - set_assistant_marker(ids): the token ids that open an assistant turn (from the frontend's chat
//   template), for the prefix cache's assistant-boundary checkpoint.
// - stats() are atomics any thread may read. ~Engine stops and joins, then finishes the I/O jobs.
#pragma once

#include "core/backend/backend.h"
#include "core/engine/engine_stats.h"
#include "core/engine/generation.h"
#include "core/engine/io_worker.h"
#include "core/engine/lane_ops.h"
#include "core/engine/prefix_cache.h"
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

    explicit Engine(SchedulerOptions options, LaneStateOptions lanes = {});
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

    using LaneDone = std::function<void(LaneOpResult)>;
    void save_lane(int lane, const std::string& name, LaneDone done);
    void restore_lane(int lane, const std::string& name, LaneDone done);
    void erase_lane(int lane, LaneDone done);
    void evict(CacheEvictRequest what, std::function<void(CacheEvictResult)> done);
    void list_cache(std::function<void(CacheListing)> done);
    void persist_all(std::function<void(LanesSummary)> done);
    // persist_all for an engine that failed (its device state is unknown, nothing reads it): each
    // lane's file is the prefix cache's host checkpoint of the lane's sequence when the engine
    // failed (the exact sequence, else its longest cached prefix: a request that was running goes
    // back to its prompt's checkpoint; noted with both lengths); a lane with none has its file
    // removed, and if it held tokens it is warned about and counted failed (it starts empty).
    void persist_checkpoints(std::function<void(LanesSummary)> done);
    void restore_all(std::function<void(LanesSummary)> done);
    void set_assistant_marker(std::vector<int32_t> marker);
    // The vision tower for requests with media (SchedulerOptions::vision). Only from the loader
    // passed to start(), on the engine thread before it returns; the encoder must outlive the engine.
    void set_vision_encoder(VisionEncoder* encoder) { options_.vision = encoder; }
    void post_io(std::function<void()> job) { io_.post(std::move(job)); }
    const LaneStateOptions& lane_options() const { return lane_state_; }

    const EngineStats& stats() const { return stats_; }
    // Any thread: a request's media decoded (the daemon's media pool) into the stats' counters.
    void count_media_decoded(uint64_t items, uint64_t wall_us) {
        stats_.n_media_items_decoded_total += items;
        stats_.t_media_decode_us_total += wall_us;
    }
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
    std::string unavailable_reason() const; // what a rejected request is told
    // Runs fn(scheduler) on the engine thread; a missing scheduler becomes Errc::Unavailable.
    void on_scheduler(std::function<void(Scheduler&)> fn, std::function<void(ErrorInfo)> failed);
    struct LanePass;
    void save_next(std::shared_ptr<LanePass> pass);
    std::shared_ptr<LaneImage> checkpoint_of(int lane, ErrorInfo& error);
    void restore_next(std::shared_ptr<LanePass> pass);

    SchedulerOptions options_;
    LaneStateOptions lane_state_;
    std::unique_ptr<PrefixCache> cache_; // outlives the scheduler (checkpoints land in it)
    EngineStats stats_;
    std::atomic<EngineState> state_{EngineState::Loading};
    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<Task> inbox_;
    std::unique_ptr<Backend> backend_;
    std::unique_ptr<Scheduler> scheduler_;
    std::vector<Scheduler::LaneSequence> failed_lanes_; // what the lanes held when the engine failed
    std::string failure_; // the error that failed the engine (engine thread)
    std::deque<GenerationRequest> early_; // submitted while loading
    std::thread thread_;
    IoWorker io_; // last: destroyed first, its jobs finish while everything they use still exists
};

} // namespace ninfer::core
