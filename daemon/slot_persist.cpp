// ninfer::daemon - --persist-slots: lanes saved at stop and restored at start, one lane at a time.
#include "daemon/slot_persist.h"

#include "core/util/error.h"
#include "core/util/file_io.h"
#include "daemon/log.h"

#include <chrono>
#include <memory>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>

namespace ninfer::daemon {
namespace {

using Clock = std::chrono::steady_clock;

// One pass over the lanes; each step hands the next lane on, the last one reports.
struct Pass {
    LanePersistence target;
    std::function<void(const std::string&)> done;
    const char* verb = "";
    int next_lane = 0;
    int n_done = 0, n_failed = 0;
    uint64_t n_bytes = 0;
    Clock::time_point t0 = Clock::now();
};

void report(const std::shared_ptr<Pass>& p) {
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - p->t0).count();
    std::string summary = std::string("slots, ") + p->verb + " " + std::to_string(p->n_done) + " lane(s), " +
                          std::to_string(p->n_bytes) + " bytes in " + std::to_string(int64_t(ms)) + " ms" +
                          (p->n_failed ? ", " + std::to_string(p->n_failed) + " failed" : "");
    p->target.post([p, summary] { p->done(summary); });
}

void save_next(const std::shared_ptr<Pass>& p) {
    if (p->next_lane >= p->target.n_lanes) return report(p);
    int lane = p->next_lane++;
    p->target.engine->post_admin([p, lane](core::Scheduler* sched) {
        auto image = std::make_shared<std::optional<core::LaneImage>>();
        bool empty = false;
        std::string error;
        try {
            if (!sched) throw Error("the engine is not serving");
            *image = sched->slot_save(lane);
        } catch (const std::exception& e) {
            error = e.what();
            empty = error_info(e).kind == Errc::NotFound; // the lane holds no sequence
        }
        p->target.io->post([p, lane, image, empty, error] {
            std::string path = lane_file_path(p->target.dir, lane);
            try {
                if (!image->has_value()) {
                    ::unlink(path.c_str()); // nothing to bring back for this lane
                    if (!empty) throw Error(error);
                } else {
                    core::make_directories(p->target.dir, 0750);
                    core::SlotFileStats st =
                        core::slot_file_write(path, p->target.identity, **image, core::file_io_mode_default());
                    ++p->n_done;
                    p->n_bytes += st.bytes;
                }
            } catch (const std::exception& e) {
                ++p->n_failed;
                log_warning("slots, cannot save lane " + std::to_string(lane) + " for the next start: " + e.what());
            }
            image->reset();
            save_next(p);
        });
    });
}

void restore_next(const std::shared_ptr<Pass>& p) {
    if (p->next_lane >= p->target.n_lanes) return report(p);
    int lane = p->next_lane++;
    p->target.io->post([p, lane] {
        std::string path = lane_file_path(p->target.dir, lane);
        struct stat st;
        if (::stat(path.c_str(), &st) != 0) return restore_next(p);
        auto image = std::make_shared<core::LaneImage>();
        core::SlotFileStats fs;
        try {
            *image = core::slot_file_read(path, p->target.identity, core::file_io_mode_default(), &fs);
        } catch (const std::exception& e) {
            ++p->n_failed;
            log_warning("slots, lane " + std::to_string(lane) + " starts empty: " + e.what());
            return restore_next(p);
        }
        p->target.engine->post_admin([p, lane, image, fs](core::Scheduler* sched) {
            try {
                if (!sched) throw Error("the engine is not serving");
                sched->slot_restore(lane, *image);
                ++p->n_done;
                p->n_bytes += fs.bytes;
            } catch (const std::exception& e) {
                ++p->n_failed;
                log_warning("slots, lane " + std::to_string(lane) + " starts empty: " + e.what());
            }
            *image = core::LaneImage{}; // free it before the next lane's is read
            restore_next(p);
        });
    });
}

std::shared_ptr<Pass> new_pass(const LanePersistence& target, std::function<void(const std::string&)> done,
                               const char* verb) {
    auto p = std::make_shared<Pass>();
    p->target = target;
    p->done = std::move(done);
    p->verb = verb;
    return p;
}

} // namespace

std::string lane_file_path(const std::string& dir, int lane) {
    return core::slot_file_path(dir, "lane-" + std::to_string(lane));
}

void persist_lanes(const LanePersistence& target, std::function<void(const std::string&)> done) {
    save_next(new_pass(target, std::move(done), "saved"));
}

void restore_lanes(const LanePersistence& target, std::function<void(const std::string&)> done) {
    auto p = new_pass(target, std::move(done), "restored");
    p->target.io->post([p] {
        core::remove_stale_temps(p->target.dir, ".nslot");
        restore_next(p);
    });
}

} // namespace ninfer::daemon
