// ninfer::core - the interface every compute backend (CPU, CUDA) implements for the scheduler.
//
// Contract:
// - A backend is created for one loaded model and a MemoryPlan (lanes, KV capacity, KV dtype,
//   max context). It owns the weights in its memory, the paged KV pool and the Gated DeltaNet
//   state slots of every lane. Engine thread only: no method is thread-safe.
// - Lanes are 0..n_lanes-1. A lane holds one sequence: its token count (= next position), its KV
//   pages and its GDN conv + recurrent state. reset_lane empties it.
// - prefill(lane, tokens, out) appends tokens to the lane (one chunk; chunks may follow and must
//   give the same result as one whole prefill). `out` selects what comes back: nothing, the last
//   position's logits, or every position's logits (perplexity).
// - prefill_with(lane, tokens, inputs, out) is prefill for a chunk of a multimodal prompt
//   (issue 31): token i's input row is inputs.embeddings row inputs.embedding_rows[i] instead of
//   its token's embedding when that index is >= 0 (the vision tower's rows at the placeholders),
//   and its RoPE position is inputs.positions[i] (M-RoPE, core/backend/mrope.h) instead of the
//   lane's next text position. The lane then remembers the largest position it holds + 1 as its
//   next text position: later prefills and decodes take token index + (next - length) on all
//   three axes, and lane images carry it (lane_image.h, RopePosition). A plain prefill or decode
//   on a lane that never had one is exactly today's text path. A backend without it throws
//   ninfer::Error("backend: ... does not take image or video input").
// - Layer-sliced prefill (issue 27): prefill_begin(lane, tokens, out, logits) starts one chunk
//   exactly as prefill(lane, tokens, out, logits) would; prefill_advance(max_layers) runs up to
//   max_layers more of the model's layers of it (0: all that are left) and returns true once the
//   chunk is complete (its last call also runs the final norm, the head and whatever else a
//   chunk's end does). The lane then holds what prefill would have left, bit for bit: the same
//   tokens, state and logits. prefill_begin copies `tokens`; `logits` must live until done.
//   One chunk at a time. Until it is done the caller may, besides prefill_advance, only:
//   decode steps of OTHER lanes (decode, decode_begin, decode_begin_forward + decode_sample,
//   decode_end: never an advance between a decode_begin_forward and its decode_sample), saves of
//   OTHER lanes (save_lane, save_lane_async, poll_saves, can_save_async, saves_in_flight),
//   sample_after_prefill / last_logits / lane_length of other lanes, and reset_lane of the
//   prefilling lane, which abandons the chunk (the lane is emptied and nothing is pending). The
//   prefilling lane is not touched otherwise; no other prefill, restore or speculative call.
//   prefill_pending() says whether a chunk is begun and not done. The default runs the whole
//   chunk in prefill_begin (prefill_advance then returns true at once): every backend is correct
//   without slicing; the CUDA backend slices text chunks it runs on the tensor cores
//   (cuda_backend.h), so other lanes' decode steps run between the slices.
// - decode(steps) advances several lanes by one token each in one batched step; every lane in
//   the batch is independent (a batch of 8 equals 8 single steps). Sampling happens inside the
//   backend (on the GPU for CUDA) so a step returns only the sampled ids, plus the chosen token's
//   logprob and top logprobs when asked.
// - save_lane / restore_lane copy a lane's whole state to/from a host LaneImage (checkpoints,
//   slot files); restore sizes are checked against the plan. save_lane_async is the checkpoint's
//   form: the CUDA backend snapshots in stream order and copies on its own thread.
// - Speculative decoding (issue 28, docs/MODEL.md §8), in rounds per lane: draft, verify, accept.
//   * draft_mtp(requests) runs the MTP head for several lanes in one batch. A request names the
//     token sampled for the lane but not yet appended (next_token) and how many drafts it wants
//     (k, 1..plan.max_draft_tokens). The head first takes every position whose final hidden state
//     it has not consumed yet (after a prefill the prompt's last one, after an accepted verify the
//     kept ones) with the token that follows it, then drafts greedily, feeding its own output back
//     as the next hidden state. Up to k ids per request come back: fewer (or none) when the head
//     lacks the lane's state (a lane restored from an image has no pending hidden state until its
//     next decode) or when k + 1 more tokens would pass max-context. Drafts change no visible
//     lane state (length, logits). `logits`, when given, receives per request one vocab row per
//     draft (the head's raw logits).
//   * verify(steps, logits) appends every step's tokens (the token to append, then the drafts:
//     1..plan.max_draft_tokens + 1 tokens) to its lane in one forward pass and writes the logits
//     of every appended position: rows in step order, then token order, vocab floats each. Row j
//     is what decode would give after tokens[0..j]. The lane keeps an open window over these
//     positions (GDN state snapshots, the logits) until accept_verified or the next call that
//     changes the lane, which keeps the whole window.
//   * verify_greedy(steps, want_rows, logits, ids) is verify for a round accepted from the rows'
//     greedy picks (speculative.h, accept_greedy_ids): the same windows (accept_verified
//     follows); ids receives the greedy pick (argmax_token: ties to the lower id) of every
//     appended position's row, in verify's row order; logits receives the vocab rows of the
//     steps i with want_rows[i] != 0 only (in step order: the lanes that sample, or read
//     logprobs). want_rows.size() must be steps.size(). The default runs verify and picks on the
//     host (the CPU backend); the CUDA backend picks on the device and copies back the ids and
//     the wanted rows alone.
//   * accept_verified(lane, n_keep) keeps the first n_keep (1..window size) tokens of the lane's
//     open window and drops the rest: the KV length rewinds, the GDN conv + recurrent state become
//     exactly the state after token n_keep - 1 (a snapshot taken during verify), and the lane's
//     last logits become row n_keep - 1, so sample_after_prefill samples the bonus token.
//     A window stays re-acceptable after its accept until a call other than draft_mtp changes the
//     lane: accept_verified(lane, m) with m below the count kept then leaves the lane exactly as
//     accept_verified(lane, m) straight after the verify would have (the drafts made since are
//     void: the MTP head takes the dropped positions again); m equal to it changes nothing.
//   * verify_accept_greedy(steps, result) is a whole greedy round for lanes on the greedy fast path
//     (speculative.h greedy_fast_path): the windows verified as verify_greedy with no rows wanted,
//     each lane's acceptance from its ids (accept_greedy_ids: n_keep = accepted + 1, or a step's
//     forced_keep, a benchmark's), accept_verified(lane, n_keep), then for each step with next_k
//     > 0 the next round's drafts as draft_mtp({lane, ids[n_keep - 1], next_k}) would give them,
//     except near max-context: a backend that sizes the drafts before it knows the keep (the
//     CUDA backend, for the whole window) may give fewer, or none and leave the head behind;
//     the caller then drafts anew (draft_mtp catches the head up). result: the ids
//     (verify_greedy's), n_keep and drafts per step. The windows stay
//     re-acceptable (above): a caller that keeps fewer tokens (a stop inside the window) calls
//     accept_verified(lane, kept), and that lane's drafts are void. The default makes those calls;
//     the CUDA backend runs the acceptance, the rollback and the head on the device and waits for
//     the device once (cuda_backend.h).
//   * greedy_rounds_in_one_call() says whether the scheduler takes such rounds through
//     verify_accept_greedy (true by default); false: through verify_greedy, the host's acceptance
//     and accept_verified, one keep per window, as before the call existed (the CUDA backend
//     without options.fused_rounds).
//   has_mtp() says whether draft_mtp works; verify and accept_verified work whenever the plan's
//   max_draft_tokens > 0. verify_rows_per_pass() is how many window rows (all lanes' tokens
//   together) one forward pass of verify takes (0: any number); more rows cost further passes,
//   so the scheduler shortens windows to fit one (the CUDA backend: 8, its decode kernels' rows). A backend that lacks a part throws ninfer::Error("backend: ...").
// - Errors: ninfer::Error("backend: ...") for bad arguments (lane out of range, context full).
// - inject_fault(what) is test-only (NINFER_FAULT=engine_step:N, core/engine/fault_injection.h):
//   the device fails as a real fault would and the call throws what the backend's checks throw then
//   (the CUDA backend: a real sticky CUDA error; the default: Error(Internal, "<name>: <what>: ...")).
#pragma once

#include "core/backend/lane_image.h"
#include "core/backend/mrope.h"
#include "core/backend/sampling.h"
#include "core/backend/speculative.h"
#include "core/util/error.h"

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace ninfer::core {

enum class LogitsOut : uint8_t { None, Last, All };

// DecodeStep::token for decode_begin: the id this lane sampled in the step begun just before
// (still on the GPU on the CUDA backend). `generated` then leaves that id out; the backend adds it.
inline constexpr int32_t kTokenOfLastStep = -2;

struct DecodeStep {
    int lane = 0;
    int32_t token = 0;             // the token to append (the previous step's sample)
    SamplingParams sampling;       // per-lane sampling
    std::span<const int32_t> generated; // ids generated so far (for penalties)
    int n_top_logprobs = 0;        // 0..20
};

// One prefill chunk's own inputs (prefill_with): spans of the chunk's length, embedding rows of
// the model's hidden size.
struct PrefillInputs {
    std::span<const MropePosition> positions; // one per token
    std::span<const int32_t> embedding_rows;  // one per token: -1 = the token's own embedding
    std::span<const float> embeddings;        // rows the indices point into
};

struct DecodeResult {
    int32_t token = 0;
    float logprob = 0;             // log-softmax of the sampled token (raw logits)
    std::vector<std::pair<int32_t, float>> top_logprobs;
};

struct DraftRequest {
    int lane = 0;
    int32_t next_token = 0; // sampled, not yet appended
    int k = 1;              // drafts wanted
};

struct VerifyStep {
    int lane = 0;
    std::span<const int32_t> tokens; // the token to append, then the drafts
};

// One lane of Backend::verify_accept_greedy.
struct GreedyRoundStep {
    int lane = 0;
    std::span<const int32_t> tokens; // the token to append, then the drafts
    int next_k = 0;                  // MTP drafts wanted for the lane's next round (0: none)
    uint32_t forced_keep = 0;        // benchmarks: keep this many tokens whatever the ids say (0: greedy)
};

struct GreedyRoundResult {
    std::vector<int32_t> ids;                 // the greedy pick of every row, in step then token order
    std::vector<uint32_t> n_keep;             // per step: tokens kept (accepted drafts + 1)
    std::vector<std::vector<int32_t>> drafts; // per step: the next round's drafts (next_k > 0)
};

class Backend {
  public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0; // "cpu" or "cuda"
    virtual int n_lanes() const = 0;
    virtual uint32_t vocab_size() const = 0;
    virtual uint32_t max_context() const = 0;
    virtual uint32_t lane_length(int lane) const = 0;
    virtual void reset_lane(int lane) = 0;

    // Appends tokens to the lane. logits receives vocab floats (Last) or tokens.size()*vocab (All).
    virtual void prefill(int lane, std::span<const int32_t> tokens, LogitsOut out,
                         std::vector<float>* logits) = 0;
    virtual void prefill_with(int lane, std::span<const int32_t> tokens, const PrefillInputs& inputs,
                              LogitsOut out, std::vector<float>* logits);
    // Layer-sliced prefill (the contract above). The default runs the whole chunk at once.
    virtual void prefill_begin(int lane, std::span<const int32_t> tokens, LogitsOut out, std::vector<float>* logits) {
        if (prefill_pending()) throw Error("backend: prefill_begin while another sliced prefill is pending");
        prefill(lane, tokens, out, logits);
        whole_prefill_begun_ = true;
    }
    virtual bool prefill_advance(int max_layers) {
        if (!whole_prefill_begun_) throw Error("backend: prefill_advance with no prefill begun");
        (void)max_layers;
        whole_prefill_begun_ = false;
        return true;
    }
    virtual bool prefill_pending() const { return false; } // the default's chunk is done at prefill_begin
    // Samples the next token of a lane from the logits left by its last prefill (the first token
    // of a generation) or, for the default decode_sample, its last decode step. Uses the same
    // sampler as decode.
    virtual DecodeResult sample_after_prefill(int lane, const SamplingParams& sampling,
                                              std::span<const int32_t> generated,
                                              int n_top_logprobs) = 0;
    virtual std::vector<DecodeResult> decode(std::span<const DecodeStep> steps) = 0;
    // Pipelined decode. decode_begin starts one step (at most one other may be begun and not yet
    // ended); a step's token may be kTokenOfLastStep when the lane is in the step begun before.
    // decode_end returns the results of the oldest step not yet ended, waiting for it. The lanes'
    // state includes a step's tokens from its decode_begin on (saves and prefills are ordered
    // after it). The CUDA backend returns from decode_begin before the GPU has run the step, so the
    // caller's bookkeeping of one step overlaps the next; this default computes at once.
    virtual void decode_begin(std::span<const DecodeStep> steps) {
        if (!begun_.empty() && !begun_.back().sampled) throw_unsampled("decode_begin");
        std::vector<DecodeStep> resolved(steps.begin(), steps.end());
        std::vector<std::vector<int32_t>> with_last(steps.size());
        for (size_t i = 0; i < resolved.size(); ++i) {
            if (resolved[i].token != kTokenOfLastStep) continue;
            resolved[i].token = token_of_last_step(resolved[i].lane);
            with_last[i].assign(resolved[i].generated.begin(), resolved[i].generated.end());
            with_last[i].push_back(resolved[i].token);
            resolved[i].generated = with_last[i];
        }
        std::vector<int> lanes;
        for (const DecodeStep& st : resolved) lanes.push_back(st.lane);
        std::vector<DecodeResult> results = decode(resolved);
        begun_.push_back({std::move(lanes), std::move(results), true});
    }
    virtual std::vector<DecodeResult> decode_end() {
        if (begun_.empty()) throw_no_step();
        if (!begun_.front().sampled) throw_unsampled("decode_end");
        std::vector<DecodeResult> out = std::move(begun_.front().results);
        begun_.erase(begun_.begin());
        return out;
    }
    // Deferred sampling, for rows whose sampling depends on the sample of the step before (a
    // constrained lane's allowed-token mask, known once that step is ended): decode_begin_forward
    // begins a step like decode_begin (tokens, kTokenOfLastStep, lane state from now on) but
    // samples nothing yet; decode_sample(steps) then gives the same rows in the same order (lanes
    // and tokens as begun) with their final sampling, generated and n_top_logprobs, and starts the
    // sampling. In between, the caller may end the step before (decode_end) and save lanes; the
    // next decode_begin*, decode_end of this step and decode() wait for decode_sample. The CUDA
    // backend runs the forward pass from decode_begin_forward on, so the host's work between the
    // two calls overlaps it. This default computes the step at once with the rows' sampling as
    // given and samples again, from the lane's last logits (sample_after_prefill), each row whose
    // final sampling has allowed_tokens (the other rows' sampling must not change).
    virtual void decode_begin_forward(std::span<const DecodeStep> steps) {
        decode_begin(steps);
        begun_.back().sampled = false;
    }
    virtual void decode_sample(std::span<const DecodeStep> steps) {
        if (begun_.empty() || begun_.back().sampled)
            throw Error("backend: decode_sample with no step begun by decode_begin_forward");
        Begun& b = begun_.back();
        check_same_rows(b.lanes, steps);
        for (size_t i = 0; i < steps.size(); ++i)
            if (!steps[i].sampling.allowed_tokens.empty())
                b.results[i] = sample_after_prefill(steps[i].lane, steps[i].sampling, steps[i].generated,
                                                    steps[i].n_top_logprobs);
        b.sampled = true;
    }
    // Raw logits of the last decode step for a lane (tests and perplexity); vocab floats.
    virtual std::vector<float> last_logits(int lane) const = 0;

    virtual LaneImage save_lane(int lane) const = 0;
    virtual void restore_lane(int lane, const LaneImage& image) = 0;
    // A save off the caller's critical path: the lane's state as it stands now (the lane may
    // change right after the call) reaches `done` on this thread from a later poll_saves(); a
    // backend that copies synchronously (the default) calls done before returning. Saves finish
    // in the order begun. poll_saves(true) first waits for every save in flight.
    virtual void save_lane_async(int lane, std::function<void(LaneImage)> done) { done(save_lane(lane)); }
    virtual void poll_saves(bool wait) {}
    virtual bool saves_in_flight() const { return false; }
    // False while a save begun now would first wait for earlier ones (every copy slot busy): a
    // caller that can do without the image (a prefix-cache checkpoint) skips it rather than stall.
    virtual bool can_save_async() const { return true; }

    virtual void inject_fault(const std::string& what) {
        throw Error(Errc::Internal, name() + ": " + what + ": injected device fault");
    }

    // Speculative decoding (the contract above). Defaults: no MTP head, no verify.
    virtual bool has_mtp() const { return false; }
    virtual uint32_t verify_rows_per_pass() const { return 0; }
    virtual std::vector<std::vector<int32_t>> draft_mtp(std::span<const DraftRequest> requests,
                                                        std::vector<std::vector<float>>* logits);
    virtual void verify(std::span<const VerifyStep> steps, std::vector<float>& logits);
    virtual void verify_greedy(std::span<const VerifyStep> steps, std::span<const uint8_t> want_rows,
                               std::vector<float>& logits, std::vector<int32_t>& ids);
    virtual void accept_verified(int lane, uint32_t n_keep);
    virtual void verify_accept_greedy(std::span<const GreedyRoundStep> steps, GreedyRoundResult& result);
    virtual bool greedy_rounds_in_one_call() const { return true; }
    // CUDA graphs of verify windows and rounds that failed to capture or instantiate so far (the
    // work then ran eagerly; graph_cache.h); 0 for a backend without graphs.
    virtual uint64_t graph_capture_failures() const { return 0; }

  protected:
    // decode_sample's rows must be the begun step's lanes in order.
    static void check_same_rows(std::span<const int> begun_lanes, std::span<const DecodeStep> steps) {
        bool same = begun_lanes.size() == steps.size();
        for (size_t i = 0; same && i < steps.size(); ++i) same = begun_lanes[i] == steps[i].lane;
        if (!same) throw Error("backend: decode_sample's rows are not the lanes of the step begun");
    }
    [[noreturn]] static void throw_unsampled(const char* call) {
        throw Error(std::string("backend: ") + call + " before decode_sample of the step begun by decode_begin_forward");
    }

  private:
    // The default decode_begin's steps not yet ended: each step's lanes and results (sampled:
    // false between decode_begin_forward and decode_sample).
    struct Begun {
        std::vector<int> lanes;
        std::vector<DecodeResult> results;
        bool sampled = true;
    };
    std::vector<Begun> begun_;
    bool whole_prefill_begun_ = false; // the default prefill_begin ran, prefill_advance not yet called
    int32_t token_of_last_step(int lane) const {
        if (!begun_.empty())
            for (size_t i = 0; i < begun_.back().lanes.size(); ++i)
                if (begun_.back().lanes[i] == lane) return begun_.back().results[i].token;
        throw_no_last(lane);
    }
    [[noreturn]] static void throw_no_step() { throw Error("backend: decode_end with no step begun"); }
    [[noreturn]] static void throw_no_last(int lane) {
        throw Error("backend: lane " + std::to_string(lane) + " asks for the token of a step it was not in");
    }
};

inline std::vector<std::vector<int32_t>> Backend::draft_mtp(std::span<const DraftRequest>,
                                                            std::vector<std::vector<float>>*) {
    throw Error("backend: " + name() + " has no MTP head");
}
inline void Backend::prefill_with(int, std::span<const int32_t>, const PrefillInputs&, LogitsOut,
                                  std::vector<float>*) {
    throw Error("backend: " + name() + " does not take image or video input (the CPU and CUDA backends do)");
}
inline void Backend::verify(std::span<const VerifyStep>, std::vector<float>&) {
    throw Error("backend: " + name() + " does not verify drafts");
}
inline void Backend::verify_greedy(std::span<const VerifyStep> steps, std::span<const uint8_t> want_rows,
                                   std::vector<float>& logits, std::vector<int32_t>& ids) {
    if (want_rows.size() != steps.size())
        throw Error("backend: verify_greedy with " + std::to_string(want_rows.size()) + " row flags for " +
                    std::to_string(steps.size()) + " steps");
    std::vector<float> all;
    verify(steps, all);
    const size_t V = vocab_size();
    ids = greedy_argmax_rows(all, V);
    logits.clear();
    size_t row = 0;
    for (size_t i = 0; i < steps.size(); ++i) {
        const size_t n = steps[i].tokens.size();
        if (want_rows[i])
            logits.insert(logits.end(), all.begin() + long(row * V), all.begin() + long((row + n) * V));
        row += n;
    }
}
inline void Backend::accept_verified(int, uint32_t) {
    throw Error("backend: " + name() + " does not verify drafts");
}

} // namespace ninfer::core
