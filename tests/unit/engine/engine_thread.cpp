// ninfer tests - the engine thread: load then Ready, requests posted while loading, load failure,
// cancel from another thread, stop with work in flight, a backend failure mid-request.
#include "core/engine/engine.h"
#include "core/util/error.h"
#include "fake_backend.h"
#include "waiting_sink.h"

#include <catch2/catch.hpp>

#include <future>

using namespace ninfer;
using namespace ninfer::core;
using namespace ninfer::test;

TEST_CASE("requests posted while loading run once the backend is ready", "[engine_thread]") {
    Engine engine({.max_context = 1000, .prefill_chunk = 4});
    std::promise<void> release;
    std::shared_future<void> gate = release.get_future().share();
    std::promise<EngineState> state;
    engine.start([gate] { gate.wait(); return std::make_unique<test::FakeBackend>(2); },
                 [&](EngineState s, const std::string&) { state.set_value(s); });
    auto sink = std::make_shared<WaitingSink>();
    engine.submit(request(1, 5, sink));
    CHECK(engine.state() == EngineState::Loading);
    release.set_value();
    CHECK(state.get_future().get() == EngineState::Ready);
    CHECK(wait(sink) == "finished:1:5"); // FinishReason::Length
    CHECK(engine.stats().n_generation_tokens_total == 5);
}

TEST_CASE("a failed load reports Failed and rejects requests as unavailable", "[engine_thread]") {
    Engine engine({});
    std::promise<std::string> why;
    engine.start([]() -> std::unique_ptr<Backend> { throw Error("backend: no memory"); },
                 [&](EngineState s, const std::string& w) { why.set_value(std::to_string(int(s)) + w); });
    CHECK(why.get_future().get() == "2backend: no memory");
    auto sink = std::make_shared<WaitingSink>();
    engine.submit(request(1, 5, sink));
    CHECK(wait(sink) == "rejected:3"); // RejectReason::Unavailable
}

TEST_CASE("cancel from another thread ends a running request; stop cancels the rest", "[engine_thread]") {
    Engine engine({.max_context = 100000, .prefill_chunk = 4});
    engine.start([] { return std::make_unique<test::FakeBackend>(2); }, [](EngineState, const std::string&) {});
    auto a = std::make_shared<WaitingSink>(), b = std::make_shared<WaitingSink>();
    engine.submit(request(1, 90000, a));
    engine.submit(request(2, 90000, b));
    a->first_token.get_future().wait();
    engine.cancel(1);
    CHECK(wait(a).rfind("finished:2:", 0) == 0); // FinishReason::Cancelled
    b->first_token.get_future().wait();
    engine.stop();
    CHECK(wait(b).rfind("finished:2:", 0) == 0);
    CHECK(engine.state() == EngineState::Stopped);
}

TEST_CASE("a backend that fails mid-request ends it Failed, rejects the queue, and serves no more", "[engine_thread]") {
    Engine engine({.max_context = 100000, .prefill_chunk = 4});
    std::promise<std::string> failure;
    engine.start(
        [] {
            auto backend = std::make_unique<test::FakeBackend>(1);
            backend->decodes_before_failure = 3;
            return backend;
        },
        [&](EngineState s, const std::string& why) {
            if (s == EngineState::Failed) failure.set_value(why);
        });
    auto running = std::make_shared<WaitingSink>(), queued = std::make_shared<WaitingSink>();
    engine.submit(request(1, 90000, running));
    engine.submit(request(2, 5, queued)); // one lane: waits behind the first
    CHECK(wait(running) == "finished:3:4"); // FinishReason::Failed after 1 + 3 tokens
    CHECK(wait(queued) == "rejected:3");    // RejectReason::Unavailable
    CHECK(failure.get_future().get() == "fake: the device was lost");
    CHECK(engine.state() == EngineState::Failed);
    auto later = std::make_shared<WaitingSink>();
    engine.submit(request(3, 5, later));
    CHECK(wait(later) == "rejected:3");
}
