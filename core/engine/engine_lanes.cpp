// ninfer::core - the engine's lane-state operations: engine thread -> I/O thread -> result, written once.
#include "core/engine/engine.h"
#include "core/engine/prefix_cache.h"

#include <chrono>
#include <sys/stat.h>
#include <unistd.h>

namespace ninfer::core {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

std::string lane_file_name(int lane) { return "lane-" + std::to_string(lane); }

bool file_exists(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
}

} // namespace

std::string LanesSummary::describe(const std::string& verb) const {
    return "slots, " + verb + " " + std::to_string(n_done) + " lane(s), " + std::to_string(bytes) + " bytes in " +
           std::to_string(int64_t(elapsed_ms)) + " ms" + (n_failed ? ", " + std::to_string(n_failed) + " failed" : "");
}

void Engine::on_scheduler(std::function<void(Scheduler&)> fn, std::function<void(ErrorInfo)> failed) {
    post_admin([fn = std::move(fn), failed = std::move(failed)](Scheduler* s) {
        if (!s) return failed({Errc::Unavailable, "the engine is not serving"});
        try {
            fn(*s);
        } catch (const std::exception& e) {
            failed(error_info(e));
        }
    });
}

void Engine::save_lane(int lane, const std::string& name, LaneDone done) {
    auto t0 = Clock::now();
    auto fail = [done, lane, t0](ErrorInfo e) { done({std::move(e), lane, 0, 0, ms_since(t0)}); };
    on_scheduler([this, lane, path = slot_file_path(lane_state_.slots_dir, name), t0, done](Scheduler& s) {
        auto image = std::make_shared<LaneImage>(s.slot_save(lane));
        io_.post([this, lane, path, t0, done, image] {
            LaneOpResult r;
            r.lane = lane;
            try {
                make_directories(lane_state_.slots_dir, 0750);
                SlotFileStats st = slot_file_write(path, lane_state_.identity, *image, file_io_mode_default());
                r.n_tokens = st.n_tokens, r.bytes = st.bytes, r.mode = st.mode;
            } catch (const std::exception& e) {
                r.error = error_info(e);
            }
            r.elapsed_ms = ms_since(t0);
            done(std::move(r));
        });
    }, fail);
}

void Engine::restore_lane(int lane, const std::string& name, LaneDone done) {
    auto t0 = Clock::now();
    io_.post([this, lane, name, t0, done] {
        auto fail = [done, lane, t0](ErrorInfo e) { done({std::move(e), lane, 0, 0, ms_since(t0)}); };
        std::string path = slot_file_path(lane_state_.slots_dir, name);
        auto image = std::make_shared<LaneImage>();
        SlotFileStats fs;
        try {
            if (!file_exists(path)) throw Error(Errc::NotFound, "no saved slot named '" + name + "'");
            *image = slot_file_read(path, lane_state_.identity, file_io_mode_default(), &fs);
        } catch (const std::exception& e) {
            return fail(error_info(e));
        }
        on_scheduler([lane, t0, done, image, fs](Scheduler& s) {
            s.slot_restore(lane, *image);
            done({std::nullopt, lane, fs.n_tokens, fs.bytes, ms_since(t0), fs.mode});
        }, fail);
    });
}

void Engine::erase_lane(int lane, LaneDone done) {
    auto t0 = Clock::now();
    on_scheduler([lane, t0, done](Scheduler& s) {
        s.slot_erase(lane);
        done({std::nullopt, lane, 0, 0, ms_since(t0)});
    }, [done, lane, t0](ErrorInfo e) { done({std::move(e), lane, 0, 0, ms_since(t0)}); });
}

void Engine::evict(CacheEvictRequest what, std::function<void(CacheEvictResult)> done) {
    on_scheduler([this, what, done](Scheduler&) {
        PrefixCache::Removed gone;
        if (!cache_) return done({});
        if (what.mode == CacheEvictRequest::Mode::All) gone = cache_->evict_all();
        else if (what.mode == CacheEvictRequest::Mode::OlderThan) gone = cache_->evict_older_than(what.older_than_s, Clock::now());
        else if ((gone = cache_->evict_key(what.key)).count == 0)
            throw Error(Errc::NotFound, "cache entry '" + what.key + "' does not exist");
        publish_cache_gauges(cache_.get(), stats_);
        done({std::nullopt, gone.count, gone.bytes});
    }, [done](ErrorInfo e) { done({std::move(e)}); });
}

void Engine::list_cache(std::function<void(CacheListing)> done) {
    on_scheduler([this, done](Scheduler&) {
        CacheListing listing;
        if (cache_) {
            listing.entries = cache_->store().list();
            listing.budget_bytes = cache_->store().budget_bytes();
            listing.used_bytes = cache_->store().used_bytes();
        }
        done(std::move(listing));
    }, [done](ErrorInfo e) {
        CacheListing failed;
        failed.error = std::move(e);
        done(std::move(failed));
    });
}

void Engine::set_assistant_marker(std::vector<int32_t> marker) {
    post_admin([marker = std::move(marker)](Scheduler* s) {
        if (s) s->set_assistant_marker(marker);
    });
}

// One pass over the lanes, one lane image in memory at a time: each step hands the next lane on.
struct Engine::LanePass {
    std::function<void(LanesSummary)> done;
    bool from_checkpoints = false; // persist_checkpoints: images from the prefix cache, not the backend
    int next_lane = 0, n_lanes = 0;
    LanesSummary summary;
    Clock::time_point t0 = Clock::now();
    bool next(int& lane) {
        if (next_lane >= n_lanes) {
            summary.elapsed_ms = ms_since(t0);
            done(summary);
            return false;
        }
        lane = next_lane++;
        return true;
    }
};

void Engine::persist_all(std::function<void(LanesSummary)> done) {
    auto pass = std::make_shared<LanePass>();
    pass->done = std::move(done);
    pass->n_lanes = stats_.n_lanes;
    io_.post([this, pass] { save_next(pass); }); // so `done` never runs on the caller's thread
}

void Engine::persist_checkpoints(std::function<void(LanesSummary)> done) {
    auto pass = std::make_shared<LanePass>();
    pass->done = std::move(done);
    pass->n_lanes = stats_.n_lanes;
    pass->from_checkpoints = true;
    io_.post([this, pass] { save_next(pass); });
}

void Engine::restore_all(std::function<void(LanesSummary)> done) {
    auto pass = std::make_shared<LanePass>();
    pass->done = std::move(done);
    pass->n_lanes = stats_.n_lanes;
    io_.post([this, pass] {
        remove_stale_temps(lane_state_.lanes_dir, ".nslot");
        restore_next(pass);
    });
}

// Engine thread. The cache's checkpoint of what the lane held when the engine failed: its exact
// sequence, else its longest cached prefix (noted with both lengths). Null when there is none:
// error NotFound for a lane that held nothing (its file is removed quietly), Unavailable for one
// that held tokens (its file is removed and the pass warns and counts it: the lane starts empty).
std::shared_ptr<LaneImage> Engine::checkpoint_of(int lane, ErrorInfo& error) {
    const std::string name = "lane " + std::to_string(lane);
    error = {Errc::NotFound, name + " held nothing"};
    if (size_t(lane) >= failed_lanes_.size() || failed_lanes_[size_t(lane)].tokens.empty()) return nullptr;
    const Scheduler::LaneSequence& seq = failed_lanes_[size_t(lane)];
    const std::string held = std::to_string(seq.tokens.size()) + " tokens";
    error = {Errc::Unavailable, name + " held " + held + " but has no host checkpoint (" +
                                    (cache_ ? "none taken, evicted, or still being copied when the device failed"
                                            : "the prefix cache is off") + "); it starts empty"};
    if (!cache_) return nullptr;
    const auto now = Clock::now();
    const LaneImage* image = cache_->store().get(prefix_key(seq.tokens, seq.media), now);
    if (!image) image = cache_->match(seq.tokens, seq.media, now);
    if (!image) return nullptr;
    if (image->tokens.size() < seq.tokens.size() && lane_state_.note)
        lane_state_.note("slots, " + name + " is saved from its host checkpoint of " +
                         std::to_string(image->tokens.size()) + " of the " + held + " it held (the rest is lost)");
    return std::make_shared<LaneImage>(*image);
}

void Engine::save_next(std::shared_ptr<LanePass> p) {
    int lane = 0;
    if (!p->next(lane)) return;
    post_admin([this, p, lane](Scheduler* s) {
        std::shared_ptr<LaneImage> image;
        ErrorInfo error{Errc::Unavailable, "the engine is not serving"};
        try {
            if (p->from_checkpoints)
                image = checkpoint_of(lane, error);
            else if (s)
                image = std::make_shared<LaneImage>(s->slot_save(lane));
        } catch (const std::exception& e) {
            error = error_info(e);
        }
        io_.post([this, p, lane, image, error] {
            std::string path = slot_file_path(lane_state_.lanes_dir, lane_file_name(lane));
            try {
                if (!image) {
                    ::unlink(path.c_str()); // nothing to bring back for this lane
                    if (error.kind != Errc::NotFound) throw Error(error.kind, error.message); // NotFound: empty
                } else {
                    make_directories(lane_state_.lanes_dir, 0750);
                    p->summary.bytes += slot_file_write(path, lane_state_.identity, *image, file_io_mode_default()).bytes;
                    ++p->summary.n_done;
                }
            } catch (const std::exception& e) {
                ++p->summary.n_failed;
                if (lane_state_.warn) lane_state_.warn("slots, cannot save lane " + std::to_string(lane) + " for the next start: " + e.what());
            }
            save_next(p);
        });
    });
}

void Engine::restore_next(std::shared_ptr<LanePass> p) {
    int lane = 0;
    if (!p->next(lane)) return;
    std::string path = slot_file_path(lane_state_.lanes_dir, lane_file_name(lane));
    if (!file_exists(path)) return restore_next(p);
    auto failed = [this, p, lane](const ErrorInfo& e) {
        ++p->summary.n_failed;
        if (lane_state_.warn) lane_state_.warn("slots, lane " + std::to_string(lane) + " starts empty: " + e.message);
    };
    auto image = std::make_shared<LaneImage>();
    SlotFileStats fs;
    try {
        *image = slot_file_read(path, lane_state_.identity, file_io_mode_default(), &fs);
    } catch (const std::exception& e) {
        failed(error_info(e));
        return restore_next(p);
    }
    // The pass goes on from the engine thread whatever happens there (the I/O thread reads next).
    on_scheduler([this, p, image, lane, fs](Scheduler& s) {
        s.slot_restore(lane, *image);
        *image = LaneImage{}; // free it before the next lane's is read
        ++p->summary.n_done;
        p->summary.bytes += fs.bytes;
        io_.post([this, p] { restore_next(p); });
    }, [this, p, failed](ErrorInfo e) {
        failed(e);
        io_.post([this, p] { restore_next(p); });
    });
}

} // namespace ninfer::core
