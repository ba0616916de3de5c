// ninfer tests - one mapping each from an error kind to a control status and to an HTTP error,
// and how a generation ended crossing to the loop thread as a ChatFinish.
#include "core/util/error.h"
#include "daemon/api_error.h"
#include "daemon/chat_sink.h"
#include "daemon/control_server.h"

#include <catch2/catch.hpp>

using namespace ninfer;
using namespace ninfer::daemon;
using proto::Status;

TEST_CASE("every error kind has its control status", "[error_mapping]") {
    CHECK(control_status(Errc::Invalid) == Status::Invalid);
    CHECK(control_status(Errc::NotFound) == Status::NotFound);
    CHECK(control_status(Errc::Busy) == Status::Busy);
    CHECK(control_status(Errc::Io) == Status::Io);
    CHECK(control_status(Errc::NoSpace) == Status::NoSpace);
    CHECK(control_status(Errc::Unavailable) == Status::Busy);
    CHECK(control_status(Errc::Internal) == Status::Internal);
}

TEST_CASE("every error kind has its HTTP error; internal detail stays in the log", "[error_mapping]") {
    ApiError invalid = api_error_of({Errc::Invalid, "template: unknown role 'robot'"}, "messages");
    CHECK((invalid.status == 400 && invalid.param == "messages"));
    CHECK(invalid.message == "template: unknown role 'robot'");
    CHECK(api_error_of({Errc::NotFound, "no such response"}).status == 404);
    ApiError failed = api_error_of({Errc::Unavailable, "the inference engine failed"});
    CHECK((failed.status == 503 && failed.code == "engine_unavailable"));
    CHECK(render_openai_error(failed).find("the inference engine failed") != std::string::npos);
    CHECK(api_error_of({Errc::Busy, "x"}).status == 503);
    CHECK(api_error_of({Errc::NoSpace, "x"}).status == 503);
    for (Errc hidden : {Errc::Io, Errc::Internal}) {
        ApiError e = api_error_of({hidden, "write: /var/lib/ninfer/secret-path: Input/output error"});
        CHECK(e.status == 500);
        CHECK(e.message.find("secret-path") == std::string::npos);
    }
}

TEST_CASE("the engine's finish reasons reach the loop thread as ChatFinish values", "[error_mapping]") {
    std::vector<ChatUpdate> got;
    // Without tokens the sink never asks the tokenizer, so none is needed here.
    ChatSink sink(nullptr, {}, {}, false, [&](ChatUpdate&& u) { got.push_back(std::move(u)); });
    core::GenerationSummary s;
    for (core::FinishReason r : {core::FinishReason::Failed, core::FinishReason::Cancelled, core::FinishReason::Length}) {
        s.reason = r;
        sink.on_finished(s);
    }
    REQUIRE(got.size() == 3);
    CHECK(got[0].finish == ChatFinish::EngineFailed);
    CHECK(got[1].finish == ChatFinish::Cancelled);
    CHECK(got[2].finish == ChatFinish::Length);
    CHECK(finish_reason_name(ChatFinish::ToolCalls) == "tool_calls");
    CHECK(finish_reason_name(ChatFinish::EngineFailed) == "engine_failed");
}
