// ninfer::core - converting and resizing sampled frames on worker threads, in order.
#include "core/media/resize_workers.h"

#include "core/util/error.h"

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

namespace ninfer::core {

struct ResizeWorkers::Shared {
    std::mutex mutex;
    std::condition_variable work, done;
    std::deque<std::pair<size_t, AVFrame*>> queue;     // (push index, frame reference)
    std::vector<std::optional<std::vector<uint8_t>>> results; // by push index, until taken
    std::exception_ptr error;
    bool stopping = false;
    std::vector<std::thread> threads;

    void run(const FfmpegApi& av, ResizedSize size, VisionInput::Kind kind) {
        FrameScaler scaler(av, size, kind);
        std::unique_lock lock(mutex);
        for (;;) {
            work.wait(lock, [&] { return stopping || !queue.empty(); });
            if (stopping) return;
            auto [index, frame] = queue.front();
            queue.pop_front();
            lock.unlock();
            std::optional<std::vector<uint8_t>> out;
            std::exception_ptr failed;
            try {
                out = scaler.convert(frame);
            } catch (...) {
                failed = std::current_exception();
            }
            av.av_frame_free(&frame);
            lock.lock();
            if (failed && !error) error = failed;
            results[index] = std::move(out);
            done.notify_all();
        }
    }
};

ResizeWorkers::ResizeWorkers(const FfmpegApi& av, ResizedSize size, VisionInput::Kind kind, size_t n_frames, int n_workers)
    : av_(av), shared_(std::make_unique<Shared>()) {
    shared_->results.resize(n_frames);
    if (n_workers <= 0) {
        inline_scaler_ = std::make_unique<FrameScaler>(av, size, kind);
        return;
    }
    // Two frames a worker: one converting, one queued, so a worker never waits on the decoder
    // while the decoder is ahead, and no more than that many source frames stay referenced.
    max_in_flight_ = 2 * size_t(n_workers);
    for (int i = 0; i < n_workers; ++i) shared_->threads.emplace_back([this, &av, size, kind] { shared_->run(av, size, kind); });
}

ResizeWorkers::~ResizeWorkers() {
    {
        std::lock_guard lock(shared_->mutex);
        shared_->stopping = true;
    }
    shared_->work.notify_all();
    for (std::thread& t : shared_->threads) t.join();
    for (auto& [index, frame] : shared_->queue) av_.av_frame_free(&frame);
}

void ResizeWorkers::push(const AVFrame* frame) {
    if (pushed_ >= shared_->results.size() || in_flight() >= max_in_flight_)
        throw Error("media: internal error: a frame pushed past the resize queue's bound");
    if (inline_scaler_) {
        shared_->results[pushed_++] = inline_scaler_->convert(frame);
        return;
    }
    AVFrame* ref = av_.av_frame_clone(frame);
    if (!ref) throw Error(Errc::NoSpace, "media: out of memory");
    {
        std::lock_guard lock(shared_->mutex);
        shared_->queue.emplace_back(pushed_++, ref);
    }
    shared_->work.notify_one();
}

std::optional<std::vector<uint8_t>> ResizeWorkers::take(bool wait) {
    if (taken_ == pushed_) return std::nullopt;
    std::unique_lock lock(shared_->mutex);
    auto ready = [&] { return shared_->error || shared_->results[taken_].has_value(); };
    if (!wait && !ready()) return std::nullopt;
    shared_->done.wait(lock, ready);
    if (shared_->error) std::rethrow_exception(shared_->error);
    std::optional<std::vector<uint8_t>> out = std::move(shared_->results[taken_]);
    shared_->results[taken_++].reset();
    return out;
}

} // namespace ninfer::core
