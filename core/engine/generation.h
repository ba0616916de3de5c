// ninfer::core - one generation request as the scheduler sees it, and the sink its results go to.
//
// Contract:
// - GenerationRequest carries token ids (and, with images or video, the decoded media): the caller
//   has rendered and tokenized the prompt and resolved max_tokens (prompt + max_tokens <=
//   max_context, checked again at submit).
// - GenerationSink methods run on the engine thread, in this order: on_admitted (a lane was
//   assigned) -> on_token* -> on_finished; or on_rejected alone (never admitted). on_token
//   returns Stop when the caller wants no more tokens (stop string, tool call closed); the token
//   is still counted. A stop token id (stop_token_ids) ends the generation with FinishReason::Stop
//   after on_token reported it. Sinks must not block: they hand events to the loop thread.
// - forced_tokens() is asked after each on_token that lets the generation continue: ids it
//   returns are appended next instead of sampled ones (a thinking budget closing the reasoning),
//   each reported through on_token (logprob 0) and counted as completion tokens.
// - speculative: the request's own speculation (issue 28), at most the server's (the scheduler
//   clamps K to the server's and runs Mtp only where the server does); nullopt = the server's.
//   Speculation changes no token: greedy output equals plain decoding, sampled output follows
//   rejection sampling (core/backend/speculative.h). draft_n / draft_n_accepted count its drafts.
// - parse_speculative("off" | "mtp:K" | "ngram:K", K 1..kMaxSpeculativeK) throws ninfer::Error
//   ("speculative: ...") on anything else; speculative_name gives the same spelling back.
// - constraint (issue 32; core/engine/reply_constraint.h): the grammar the reply must follow, its
//   fresh state owned by the request (so a request is move-only). The scheduler samples only
//   tokens it allows, ends the reply with Stop when it is finished, and ends the request with
//   ConstraintFailed when it allows nothing. Constrained requests speculate with n-gram drafts
//   checked against the grammar (mtp:K becomes ngram:K for them; scheduler.h).
// - Everything here is plain data except the sink, which the request shares with its caller.
#pragma once

#include "core/backend/backend.h"
#include "core/backend/sampling.h"
#include "core/vision/vision_input.h"
#include "core/engine/reply_constraint.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ninfer::core {

// Failed: the backend threw while the request ran (Engine, Scheduler::fail_all); its output is
// incomplete and the engine serves no more. ConstraintFailed: the request's constraint allowed no
// token, or refused a forced one; only this request ends (its output is incomplete).
enum class FinishReason : uint8_t { Stop, Length, Cancelled, Failed, ConstraintFailed };
// Unsupported: the request needs what this engine cannot run (media without a vision tower, or
// media whose placeholders do not pair up; Scheduler::refuse_media).
enum class RejectReason : uint8_t { QueueFull, QueueTimeout, ContextExceeded, Unavailable, Unsupported };

enum class TokenVerdict : uint8_t { Continue, Stop };

enum class SpeculativeKind : uint8_t { Off, Mtp, Ngram };
inline constexpr int kMaxSpeculativeK = 5;

struct SpeculativeConfig {
    SpeculativeKind kind = SpeculativeKind::Off;
    int k = 0; // drafts per round, 1..kMaxSpeculativeK (0 with Off)
    bool on() const { return kind != SpeculativeKind::Off && k > 0; }
    bool operator==(const SpeculativeConfig&) const = default;
};

SpeculativeConfig parse_speculative(const std::string& text);
std::string speculative_name(const SpeculativeConfig& config);

struct GenerationSummary {
    FinishReason reason = FinishReason::Stop;
    int lane = -1;
    uint32_t prompt_tokens = 0;
    uint32_t cached_tokens = 0;     // prompt tokens reused from the lane's previous sequence
    uint32_t completion_tokens = 0; // sampled tokens, a final stop token included
    double queue_ms = 0;            // submit -> admitted to a lane
    double prompt_ms = 0;           // admitted -> first token sampled
    double decode_ms = 0;           // first token -> finish
    uint32_t draft_n = 0;           // speculative drafts verified
    uint32_t draft_n_accepted = 0;  // of which accepted
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
    // The sink reads DecodeResult::logprob. A speculative round computes it (a log-sum-exp over the
    // vocabulary per token, on the host) only then; a plain step's comes with its sample anyway.
    bool logprobs = false;
    std::optional<SpeculativeConfig> speculative; // nullopt: the server's
    // Images and videos of the prompt in prompt order (core/vision/vision_input.h); their rows
    // replace the placeholder tokens (SchedulerOptions::vision runs the tower before the prefill).
    // media_spans[i] is where media[i]'s placeholder tokens sit: lane reuse and the prefix cache
    // match a prefix only when the digests of the spans starting in it agree too.
    std::vector<VisionInput> media;
    std::vector<MediaSpan> media_spans;
    std::optional<ConstraintSpec> constraint;     // nullopt: free text
    std::shared_ptr<GenerationSink> sink;
    std::chrono::steady_clock::time_point submitted = std::chrono::steady_clock::now();
};

} // namespace ninfer::core
