// ninfer tests - a GenerationSink the test thread can wait on while the engine thread runs the
// request, plus a small request builder. Contract: wait() returns "finished:<reason>:<tokens>" or
// "rejected:<reason>" (the message in reject_message) and fails the test after 10 s.
#pragma once

#include "core/engine/generation.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>

namespace ninfer::test {

struct WaitingSink final : core::GenerationSink {
    std::promise<std::string> done;
    std::atomic<int> n_tokens{0};
    std::promise<void> first_token;
    core::TokenVerdict on_token(const core::DecodeResult&) override {
        if (n_tokens++ == 0) first_token.set_value();
        return core::TokenVerdict::Continue;
    }
    void on_finished(const core::GenerationSummary& s) override {
        done.set_value("finished:" + std::to_string(int(s.reason)) + ":" + std::to_string(s.completion_tokens));
    }
    std::string reject_message; // set before `done`
    void on_rejected(core::RejectReason r, const std::string& message) override {
        reject_message = message;
        done.set_value("rejected:" + std::to_string(int(r)));
    }
};

inline core::GenerationRequest request(uint64_t id, uint32_t max_tokens, std::shared_ptr<WaitingSink> sink) {
    core::GenerationRequest r;
    r.id = id;
    r.prompt = {1, 2, 3, 4, 5};
    r.max_tokens = max_tokens;
    r.sink = std::move(sink);
    return r;
}

inline std::string wait(std::shared_ptr<WaitingSink> s) {
    auto f = s->done.get_future();
    REQUIRE(f.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
    return f.get();
}

} // namespace ninfer::test
