// ninfer::core - one generation request as the scheduler sees it, and the sink its results go to.
//
// Contract:
// - GenerationRequest carries token ids only: the caller has rendered and tokenized the prompt and
//   resolved max_tokens (prompt + max_tokens <= max_context, checked again at submit).
// - GenerationSink methods run on the engine thread, in this order: on_admitted (a lane was
//   assigned) -> on_token* -> on_finished; or on_rejected alone (never admitted). on_token
//   returns Stop when the caller wants no more tokens (stop string, tool call closed); the token
//   is still counted. A stop token id (stop_token_ids) ends the generation with FinishReason::Stop
//   after on_token reported it. Sinks must not block: they hand events to the loop thread.
// - forced_tokens() is asked after each on_token that lets the generation continue: ids it
//   returns are appended next instead of sampled ones (a thinking budget closing the reasoning),
//   each reported through on_token (logprob 0) and counted as completion tokens.
// - Everything here is plain data except the sink, which the request shares with its caller.
#pragma once

#include "core/backend/backend.h"
#include "core/backend/sampling.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ninfer::core {

// Failed: the backend threw while the request ran (Engine, Scheduler::fail_all); its output is
// incomplete and the engine serves no more.
enum class FinishReason : uint8_t { Stop, Length, Cancelled, Failed };
enum class RejectReason : uint8_t { QueueFull, QueueTimeout, ContextExceeded, Unavailable };

enum class TokenVerdict : uint8_t { Continue, Stop };

struct GenerationSummary {
    FinishReason reason = FinishReason::Stop;
    int lane = -1;
    uint32_t prompt_tokens = 0;
    uint32_t cached_tokens = 0;     // prompt tokens reused from the lane's previous sequence
    uint32_t completion_tokens = 0; // sampled tokens, a final stop token included
    double queue_ms = 0;            // submit -> admitted to a lane
    double prompt_ms = 0;           // admitted -> first token sampled
    double decode_ms = 0;           // first token -> finish
};

class GenerationSink {
  public:
    virtual ~GenerationSink() = default;
    virtual void on_admitted(int lane, uint32_t cached_tokens) {}
    virtual TokenVerdict on_token(const DecodeResult& result) = 0;
    virtual void on_finished(const GenerationSummary& summary) = 0;
    virtual void on_rejected(RejectReason reason, const std::string& message) = 0;
    virtual std::vector<int32_t> forced_tokens() { return {}; }
};

struct GenerationRequest {
    uint64_t id = 0;
    std::vector<int32_t> prompt;
    SamplingParams sampling; // `step` is set by the scheduler
    uint32_t max_tokens = 0;
    std::vector<int32_t> stop_token_ids;
    int n_top_logprobs = 0;
    std::shared_ptr<GenerationSink> sink;
    std::chrono::steady_clock::time_point submitted = std::chrono::steady_clock::now();
};

} // namespace ninfer::core
