// ninfer::core - the scheduler: lanes, a bounded FIFO queue, KV admission, continuous batching.
//
// Contract (engine thread only):
// - Lanes 0..n_lanes-1 of the Backend. submit() queues a request FIFO; it is rejected at once
//   (sink->on_rejected) when the queue holds max_pending requests (QueueFull) or when
//   prompt + max_tokens exceeds max_context or the prompt is empty (ContextExceeded).
// - step() is one scheduling round: drop queued requests older than pending_timeout
//   (QueueTimeout); admit the queue's head while a lane is free and its prompt + max_tokens fits
//   in the unreserved KV capacity (strict FIFO: a head that does not fit blocks the rest); run at
//   most ONE prefill chunk (prefill_chunk tokens, of the lane with the fewest prompt tokens left,
//   ties to the earliest admitted); then ONE batched
//   decode step for every decoding lane. So a decoding lane waits at most one chunk between
//   tokens while another lane prefills.
// - Layer-sliced prefill (options.prefill_slice_layers > 0; scheduler_sliced.cpp): while some
//   lane decodes, a text chunk runs through Backend::prefill_begin / prefill_advance, that many
//   layers per round, so a round is one slice and then the decode step, and the decoders wait one
//   slice between tokens instead of one chunk. The chunk's lane takes no other chunk, nor does any
//   other lane, until it is done; its result (tokens, first sample) is that of the whole chunk. An
//   idle engine (no decoding lane: the rest of a chunk once the decoders have finished), a request
//   with media and rounds with a speculating lane run chunks whole. Cancelling the request
//   mid-chunk resets its lane (Backend::reset_lane abandons the chunk); slot_save of that lane is
//   refused as Busy until the chunk is done.
// - A free lane keeps the tokens of its last sequence; a new prompt that extends them exactly
//   reuses that state and prefills only the rest (cached_tokens). A new request takes the free
//   lane with the longest such prefix, else the lowest-numbered free lane.
// - cancel(id) removes a queued request or frees a running one's lane before the next step
//   (FinishReason::Cancelled). cancel_all() does it for every request.
// - fail_all(why) is for a backend that threw: queued requests are rejected Unavailable ("the
//   engine failed: why"), running ones end with FinishReason::Failed, and no backend call is made
//   (its state is unknown); the scheduler must not step again.
// - Greedy results do not depend on batching: each lane's tokens come only from its own state.
// - Pipelined decode (options.pipeline_decode): a decode round begins step k+1 (each running
//   lane's token is the sample of step k, still on the device, or a forced id) and then ends step
//   k, reporting its tokens while the backend computes k+1. A lane whose request finishes at step
//   k has its row of k+1 discarded. Every sampled token is fed to its lane, the last one too: a
//   lane that finished with its last sample unfed (the unpipelined order, a first token that
//   ends the request) feeds it in the next round as a discarded row before it is free again, so
//   lane state, checkpoints and slot images are the same in either order.
// - Speculative decoding (options.speculative, a request's own lower setting; scheduler_
//   speculative.cpp): a decoding lane that speculates takes, instead of a plain step, a round of
//   draft (the MTP head, batched over the round's lanes, or the lane's n-gram drafter) -> one
//   batched Backend::verify_greedy of [pending sample, drafts] -> acceptance -> accept_verified:
//   a lane that is greedy with nothing else reading its rows (speculative.h, greedy_fast_path)
//   is accepted from the rows' greedy ids (accept_greedy_ids; its rows stay in the backend), the
//   others from their rows (accept_drafts / accept_masked_drafts). A
//   round is not pipelined: when a lane speculates, the step in flight is ended first; the other
//   lanes then take their plain step (begun after the round). A round reports the accepted drafts
//   and the token after them one by one exactly as plain samples: forced ids replace them (the
//   rest of the run is dropped), a Stop verdict, stop token, max_tokens or the context end
//   finish the lane there, and the lane is rolled back to hold exactly the reported tokens but
//   the last, which stays pending (fed later like any sample). A lane with forced ids waiting
//   takes plain steps. When every lane of a round is on the greedy fast path the round is one
//   Backend::verify_accept_greedy (verify, acceptance, rollback and the MTP lanes' next drafts; on
//   the GPU one host synchronisation): the lanes' next round takes those drafts while the lane is
//   as the round left it (same request, history and pending token, K no larger than asked), else
//   it drafts anew; a lane that reports fewer tokens than the backend kept (a stop inside the
//   window) is rolled back further by accept_verified and its drafts dropped. With
//   speculation_policy.fit_one_pass a round's windows fit one verify pass
//   (Backend::verify_rows_per_pass): K is lowered to rows / lanes - 1, and with under 2 rows a
//   lane the lanes take plain steps.
//   A lane speculates only while options.speculation_policy allows it
//   (speculation_gate.h): no more than max_lanes lanes decoding, and its recent acceptance at
//   least min_acceptance, else it pauses (plain steps) and probes again later. K is clamped so that the verify window fits the context and is not longer
//   than the tokens still allowed; admission reserves K more tokens per speculating request
//   (the verify window's slack), up to the KV capacity left after prompt + max_tokens.
// - Constrained requests (GenerationRequest::constraint; scheduler_constraint.cpp): the lane owns
//   a ReplyConstraint built at admission. Before each of its samples the scheduler fills the
//   lane's allowed-token bitset from the constraint's state after every reported token, and the
//   sampler applies it (SamplingParams::allowed_tokens); each reported token (forced ids too) is
//   fed to the constraint. A step's mask depends on the previous step's token: when a constrained
//   lane's sample is still in flight, the round begins its step with Backend::decode_begin_forward
//   (the forward pass runs), ends the step in flight (reporting that token), fills the masks and
//   calls Backend::decode_sample, so constrained rounds stay pipelined and give the same tokens
//   as the unpipelined order. A constraint that allows nothing or refuses a forced id ends the
//   request with FinishReason::ConstraintFailed; a finished one ends it with Stop.
// - Constrained lanes speculate with n-gram drafts checked on the host (core/engine/
//   constrained_drafts.h): a request that speculates (the server's setting or its own lower one;
//   with mtp:K configured, n-gram drafts of the same K: MTP drafts live on the device, n-gram
//   drafts are host tokens, so the check adds no synchronisation and a round keeps its one) takes
//   rounds like other lanes. Before the verify, its drafts walk its constraint and back
//   (accept, then rollback): the run is cut at the first draft the grammar refuses or after which
//   nothing is allowed (an end token) and after one that finishes the grammar; cut drafts are never
//   verified (EngineStats::n_spec_draft_tokens_refused_total). Verify row j is sampled under the
//   mask after drafts 0..j-1 (accept_masked_drafts), i.e. as plain constrained decoding samples
//   it: greedy output equals plain constrained greedy output token for token, sampled output
//   follows its distribution. The constraint is fed only the reported tokens, one by one.
#pragma once

#include "core/backend/backend.h"
#include "core/backend/speculative.h"
#include "core/engine/speculation_gate.h"
#include "core/engine/engine_stats.h"
#include "core/engine/generation.h"
#include "core/engine/ngram_drafter.h"
#include "core/engine/vision_prefill.h"

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace ninfer::core {

class PrefixCache;

struct SchedulerOptions {
    uint32_t max_context = 8192;
    uint64_t kv_capacity_tokens = 0; // 0 = n_lanes * max_context
    uint32_t prefill_chunk = 1024;
    // The chunk while any lane decodes (0 = prefill_chunk): a decode step waits for the chunk
    // before it, so this bounds the inter-token latency running streams see during a long
    // prompt's prefill, at the cost of that prompt's time to first token.
    uint32_t prefill_chunk_decoding = 0;
    // Layers of a prefill chunk per round while some lane decodes (0 = the whole chunk in one
    // round): the decoders then wait one slice, not one chunk, between tokens; the prompt's first
    // token comes later by the decode steps run between its slices.
    uint32_t prefill_slice_layers = 0;
    uint32_t max_pending = 64;
    uint64_t pending_timeout_ms = 60000;
    PrefixCache* prefix_cache = nullptr; // engine-thread owned; checkpoints at prompt end and reply end,
                                         // skipped while the backend's copies are busy (can_save_async)
    // Begin the next decode step before the previous one's tokens are reported (Backend::
    // decode_begin / decode_end): the GPU never waits for this thread's bookkeeping. false: each
    // step is ended before the next begins (the reference the pipelined order must equal).
    bool pipeline_decode = true;
    // The server's speculation. Mtp needs Backend::has_mtp(); any kind needs the backend's plan to
    // verify K + 1 tokens (MemoryRequest.max_draft_tokens >= k).
    SpeculativeConfig speculative{};
    // When a speculating lane takes a round (speculation_gate.h): at most max_lanes decoding, and
    // its recent drafts accepted at least min_acceptance of the time.
    SpeculationPolicy speculation_policy{};
    // Tests only (null in serving): a lane that speculates with n-gram drafts takes them from this
    // function of (its prompt + reported tokens, k) instead of prompt lookup: an oracle or an
    // always-wrong drafter. Constrained lanes' drafts are still checked against their grammar.
    std::function<std::vector<int32_t>(std::span<const int32_t>, int)> test_drafter{};
    // The vision tower (engine-thread owned; null: requests with media are refused). A request's
    // media are encoded when its lane's prefill starts (only the items past a reused prefix), and
    // its chunks go through Backend::prefill_with (scheduler_vision.cpp).
    VisionEncoder* vision = nullptr;
};

class Scheduler {
  public:
    using Clock = std::chrono::steady_clock;
    Scheduler(Backend& backend, SchedulerOptions options, EngineStats& stats);
    ~Scheduler(); // waits for checkpoints in flight

    void submit(GenerationRequest request);
    void cancel(uint64_t request_id);
    void cancel_all();
    void fail_all(const std::string& why);
    bool has_work() const;       // something to compute now
    bool has_requests() const;   // anything queued or running
    // The earliest queue timeout, or a few ms ahead while checkpoints are being copied.
    std::optional<Clock::time_point> next_deadline() const;
    void step();

    int n_running() const;
    size_t n_waiting() const { return queue_.size(); }

    // Slots (control plane, scheduler_slots.cpp; between steps). A busy lane is saved as it stands
    // at this step boundary; restore and erase need an idle lane. Errors: ninfer::Error of kind
    // NotFound ("slot N is empty", "slot N does not exist") or Busy ("slot N is busy").
    LaneImage slot_save(int lane) const;
    // What each lane holds (token ids fed, their media), for the host checkpoints of a failed
    // engine (Engine::persist_checkpoints): read before fail_all, which forgets running lanes'.
    struct LaneSequence {
        std::vector<int32_t> tokens;
        std::vector<MediaSpan> media;
    };
    std::vector<LaneSequence> lane_sequences() const;
    void slot_restore(int lane, const LaneImage& image);
    void slot_erase(int lane);
    // Token ids that open an assistant turn ("<|im_start|>assistant\n"): with a prefix cache, the
    // prompt is checkpointed right after their last occurrence, where the next turn's prompt still
    // agrees with this one (the template re-renders earlier replies without their reasoning).
    void set_assistant_marker(std::vector<int32_t> marker) { assistant_marker_ = std::move(marker); }

  private:
    // Microseconds from a to b (the engine-time counters of EngineStats).
    static uint64_t us_between(Clock::time_point a, Clock::time_point b) {
        return uint64_t(std::chrono::duration_cast<std::chrono::microseconds>(b - a).count());
    }
    struct Lane {
        std::optional<GenerationRequest> request;
        std::vector<int32_t> history; // tokens fed to the backend (kept after finish for reuse)
        std::vector<MediaSpan> media; // the media among history's tokens (spans starting before its end count)
        std::vector<int32_t> generated;
        uint32_t n_prefilled = 0;     // prompt tokens already in the lane
        uint32_t cached_tokens = 0;
        uint32_t checkpoint_at = 0;   // prompt position of the assistant-boundary checkpoint (0 = none)
        int32_t pending_token = -1;   // sampled, not yet fed
        int samples_outstanding = 0;  // begun, not ended steps in which this request samples
        bool closing = false;         // finished, its last sample still to be fed; not free yet
        bool checkpoint_when_fed = false; // closing: checkpoint once the last sample is fed
        std::deque<int32_t> forced;   // sink-forced ids that replace the next samples
        bool decoding = false;
        Clock::time_point admitted, first_token;
        uint64_t admit_order = 0;
        SpeculativeConfig speculative; // this request's (off for plain lanes)
        NgramDrafter ngram;            // prompt + reported tokens, with ngram speculation
        uint32_t draft_n = 0, draft_n_accepted = 0;
        SpeculationGate gate;          // whether it takes a round or a plain step (pauses after bad windows)
        // The MTP drafts the lane's last greedy round made for its next one (Backend::
        // verify_accept_greedy): valid while the lane is as that round left it (the same admission,
        // history length and pending token) and the next round wants at most `asked` of them.
        struct CarriedDrafts {
            std::vector<int32_t> ids;
            int asked = 0;
            int32_t after = -1;    // the pending token they follow
            size_t at_history = 0; // history.size() when they were made
            uint64_t admission = 0;
        };
        std::optional<CarriedDrafts> carried;
        std::optional<VisionPrefill> vision; // the request's tower rows and positions while it prefills
        uint64_t vision_admission = 0;       // the admission they belong to
        std::unique_ptr<ReplyConstraint> constraint; // the request's, from admission to finish
        std::vector<uint32_t> mask;                  // its allowed-token bitset for the next sample
    };

    void expire_queue(Clock::time_point now);
    void admit(Clock::time_point now);
    int pick_lane(const GenerationRequest& request) const;
    uint32_t chunk_tokens() const;
    void prefill_one_chunk();
    // A chunk's bookkeeping once the backend holds it: history, counts, checkpoints and, at the
    // prompt's end, the first sample (t0: when its prefill began, for the engine-time counters).
    void chunk_prefilled(int lane_index, uint32_t n, bool last, Clock::time_point t0);
    // Layer-sliced prefill (scheduler_sliced.cpp).
    bool slice_chunk(const Lane& lane) const; // whether this chunk runs in slices now
    void begin_sliced_chunk(int lane_index, std::span<const int32_t> chunk, bool last);
    void advance_sliced_chunk();
    bool any_decoding() const;
    // Multimodal requests (scheduler_vision.cpp): refuse_media rejects one this engine cannot
    // run (true = rejected); prefill_chunk feeds a chunk, through prefill_with when the request has
    // media (false: its media could not be encoded and the request was finished Failed).
    bool refuse_media(GenerationRequest& request);
    bool prefill_chunk(int lane_index, std::span<const int32_t> chunk, LogitsOut out);
    // One decode round: begin the next step, end the one begun in the previous round.
    void decode_batch();
    bool ngram_cannot_draft(Lane& l); // scheduler.cpp: no round for it while its next token is on the device
    static void catch_up_ngram(Lane& l); // its drafter takes the reported tokens it lacks
    void end_step_in_flight();
    bool any_closing() const; // a finished lane still to feed its last sample
    // Speculation (scheduler_speculative.cpp).
    SpeculativeConfig speculation_of(const GenerationRequest& request) const; // clamped to the server's
    uint32_t verify_slack(const GenerationRequest& request) const;            // KV reserved beyond max_tokens
    int round_drafts(const Lane& lane) const; // K for this round (0: a plain step)
    // Runs one round for the lanes marked in `speculating` (set for the lanes it ran).
    void speculative_round(std::vector<bool>& speculating);
    // Reports a round's tokens and keeps that many in the backend's window; kept_by_backend: the
    // tokens a greedy round already kept there (0: the window is still to accept). Returns the kept.
    uint32_t report_round(int lane_index, std::span<const int32_t> drafts, std::span<const float> raw_rows,
                          const DraftAcceptance& acceptance, uint32_t kept_by_backend = 0);
    // The lane's carried drafts for a round of k, if they are still valid (null: draft anew).
    const std::vector<int32_t>* carried_drafts(const Lane& lane, int k) const;
    // The K to draft now for the lane's next round (0: it cannot speculate then), fit: this round's cap.
    int next_round_drafts(const Lane& lane, int fit) const;
    // The round's verify and acceptance when every lane is on the greedy fast path: one
    // Backend::verify_accept_greedy, which also drafts the MTP lanes' next round.
    void greedy_round(const std::vector<int>& lanes, const std::vector<std::vector<int32_t>>& drafts,
                      const std::vector<std::vector<int32_t>>& windows, int fit);
    void lane_fed_last_sample(int lane_index);
    // Constraints (scheduler_constraint.cpp). constrain_sample fills the lane's mask and points
    // `sampling` at it; false when nothing is allowed (the request ended ConstraintFailed).
    bool constrain_sample(int lane_index, SamplingParams& sampling);
    bool constrained_sample_in_flight() const; // a constrained lane's sample is not reported yet
    struct StepRow {
        int lane = 0;
        bool closing = false;    // a closing lane's last sample: its result is discarded
        uint64_t admission = 0;  // else the admission (Lane::admit_order) that samples in this row
    };
    // The rows of a step begun by decode_begin_forward, once the step before has been reported:
    // the constrained lanes' masks from their constraints' new state, then Backend::decode_sample.
    void sample_constrained_later(std::vector<DecodeStep>& steps, const std::vector<StepRow>& rows);
    // Reports a sampled token; returns false if the lane finished.
    bool accept_token(int lane_index, DecodeResult result);
    void finish(int lane_index, FinishReason reason);
    uint64_t reserved_tokens() const;
    void update_gauges();
    void publish_lanes();
    bool restore_from_cache(int lane, const GenerationRequest& request, size_t reusable, Clock::time_point now);
    // Whether the lane's sequence is a proper prefix of the request's prompt, media digests included.
    static bool lane_extends(const Lane& lane, const GenerationRequest& request);
    void checkpoint(int lane);
    uint32_t assistant_boundary(const std::vector<int32_t>& prompt, uint32_t after) const;
    const Lane& slot_lane(int lane) const;

    Backend& backend_;
    SchedulerOptions options_;
    EngineStats& stats_;
    std::deque<GenerationRequest> queue_;
    std::vector<Lane> lanes_;
    std::vector<StepRow> in_flight_; // rows of the step begun and not yet ended
    // The sliced chunk begun and not yet done: its lane, tokens, whether it ends the prompt, and
    // the engine thread's time in its prefill calls so far.
    struct SlicedChunk {
        int lane = 0;
        uint32_t n = 0;
        bool last = false;
        uint64_t host_us = 0;
    };
    std::optional<SlicedChunk> slicing_;
    uint64_t admit_counter_ = 0;
    std::vector<int32_t> assistant_marker_;
};

} // namespace ninfer::core
