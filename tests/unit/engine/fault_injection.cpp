// ninfer tests - NINFER_FAULT=engine_step:N: the value's parsing, the step count, and the engine
// failing through its ordinary failure path at that step.
#include "core/engine/engine.h"
#include "core/engine/fault_injection.h"
#include "core/util/error.h"
#include "fake_backend.h"
#include "waiting_sink.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <future>
#include <mutex>

using namespace ninfer;
using namespace ninfer::core;
using namespace ninfer::test;

namespace {

struct FaultEnv { // sets NINFER_FAULT for one test, unsets it after
    explicit FaultEnv(const char* value) { ::setenv("NINFER_FAULT", value, 1); }
    ~FaultEnv() { ::unsetenv("NINFER_FAULT"); }
};

} // namespace

TEST_CASE("NINFER_FAULT: engine_step:N is read, other faults are left alone, a bad step is refused", "[fault_injection]") {
    CHECK(engine_fault_step(nullptr) == 0);
    CHECK(engine_fault_step("") == 0);
    CHECK(engine_fault_step("before_rename") == 0); // core/util/file_io.cpp's
    CHECK(engine_fault_step("engine_step:1") == 1);
    CHECK(engine_fault_step("engine_step:400") == 400);
    CHECK(engine_fault_step("engine_step:1000000000") == 1000000000);
    for (const char* bad : {"engine_step:", "engine_step:0", "engine_step:-3", "engine_step:x", "engine_step:5x",
                            "engine_step: 5", "engine_step:1000000001", "engine_step:99999999999999999999999"})
        CHECK_THROWS_WITH(engine_fault_step(bad), Catch::Contains(std::string("NINFER_FAULT=") + bad) &&
                                                      Catch::Contains("whole number from 1 to 10^9"));
}

TEST_CASE("EngineFault fires once, at the step it names", "[fault_injection]") {
    EngineFault none(0);
    CHECK_FALSE(none.armed());
    for (int i = 0; i < 5; ++i) CHECK_FALSE(none.count_step());
    EngineFault third(3);
    CHECK(third.armed());
    CHECK(third.describe() == "NINFER_FAULT=engine_step:3");
    CHECK_FALSE(third.count_step());
    CHECK_FALSE(third.count_step());
    CHECK(third.count_step());
    CHECK_FALSE(third.count_step());
}

TEST_CASE("NINFER_FAULT=engine_step:N fails the backend at that step: the request fails, later ones are told why",
          "[fault_injection]") {
    FaultEnv env("engine_step:6");
    std::mutex warned_mutex;
    std::string warned;
    LaneStateOptions lanes;
    lanes.warn = [&](const std::string& w) {
        std::lock_guard lock(warned_mutex);
        warned += w;
    };
    Engine engine({.max_context = 100000, .prefill_chunk = 4}, lanes);
    std::promise<std::string> failure;
    engine.start([] { return std::make_unique<test::FakeBackend>(1); },
                 [&](EngineState s, const std::string& why) {
                     if (s == EngineState::Failed) failure.set_value(why);
                 });
    auto running = std::make_shared<WaitingSink>();
    engine.submit(request(1, 90000, running));
    const std::string result = wait(running);
    CHECK(result.rfind("finished:3:", 0) == 0); // FinishReason::Failed
    CHECK(running->n_tokens > 0);                 // it ran a few steps first
    CHECK(running->n_tokens < 6);
    const std::string why = "fake: NINFER_FAULT=engine_step:6: injected device fault"; // Backend's default
    CHECK(failure.get_future().get() == why);
    CHECK(engine.state() == EngineState::Failed);
    auto later = std::make_shared<WaitingSink>();
    engine.submit(request(2, 5, later));
    CHECK(wait(later) == "rejected:3"); // RejectReason::Unavailable
    CHECK(later->reject_message == "the engine failed: " + why);
    engine.stop();
    std::lock_guard lock(warned_mutex);
    CHECK(warned.find("NINFER_FAULT=engine_step:6 is set") != std::string::npos);
}

TEST_CASE("a malformed NINFER_FAULT=engine_step value fails the load with the reason", "[fault_injection]") {
    FaultEnv env("engine_step:soon");
    Engine engine({});
    std::promise<std::string> why;
    bool loaded = false;
    engine.start([&] { loaded = true; return std::make_unique<test::FakeBackend>(1); },
                 [&](EngineState s, const std::string& w) { why.set_value(std::to_string(int(s)) + w); });
    const std::string reported = why.get_future().get();
    CHECK(reported.rfind("2engine: NINFER_FAULT=engine_step:soon:", 0) == 0); // EngineState::Failed
    engine.stop();
    CHECK_FALSE(loaded);
}
