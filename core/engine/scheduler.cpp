// ninfer::core - scheduler: FIFO admission with KV reservation, chunked prefill, batched decode.
#include "core/engine/scheduler.h"

#include "core/engine/prefix_cache.h"
#include "core/util/thread_clock.h"

#include <algorithm>

namespace ninfer::core {
namespace {

double ms_between(Scheduler::Clock::time_point a, Scheduler::Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

bool is_stop_token(const GenerationRequest& r, int32_t token) {
    return std::find(r.stop_token_ids.begin(), r.stop_token_ids.end(), token) != r.stop_token_ids.end();
}

} // namespace

Scheduler::Scheduler(Backend& backend, SchedulerOptions options, EngineStats& stats)
    : backend_(backend), options_(options), stats_(stats), lanes_(size_t(backend.n_lanes())) {
    if (options_.kv_capacity_tokens == 0) options_.kv_capacity_tokens = uint64_t(backend.n_lanes()) * options_.max_context;
    stats_.n_lanes = backend.n_lanes();
    stats_.kv_capacity_tokens = options_.kv_capacity_tokens;
    if (options_.speculative.kind == SpeculativeKind::Mtp && options_.speculative.on() && !backend.has_mtp())
        throw Error("scheduler: speculative " + speculative_name(options_.speculative) + " needs an MTP head, and the " +
                    backend.name() + " backend's model has none");
}

void Scheduler::submit(GenerationRequest request) {
    if (refuse_media(request)) return;
    uint64_t need = uint64_t(request.prompt.size()) + request.max_tokens;
    if (request.prompt.empty() || request.max_tokens == 0 || need > options_.max_context ||
        need > options_.kv_capacity_tokens) {
        ++stats_.n_requests_rejected_total;
        request.sink->on_rejected(RejectReason::ContextExceeded,
                                  "prompt of " + std::to_string(request.prompt.size()) + " tokens + max_tokens " +
                                      std::to_string(request.max_tokens) + " does not fit the context of " +
                                      std::to_string(options_.max_context) + " tokens");
        return;
    }
    if (request.constraint && (!request.constraint->grammar ||
                               (request.constraint->after_reasoning && request.constraint->think_end_token < 0))) {
        ++stats_.n_requests_rejected_total;
        request.sink->on_rejected(RejectReason::Unavailable,
                                  "constraint: a constrained request needs a grammar (and after the reasoning, the "
                                  "token that closes it)");
        return;
    }
    size_t free_lanes = lanes_.size() - size_t(n_running());
    if (queue_.size() >= options_.max_pending + free_lanes) {
        ++stats_.n_requests_rejected_total;
        request.sink->on_rejected(RejectReason::QueueFull, "server overloaded: " +
                                                               std::to_string(options_.max_pending) +
                                                               " requests already waiting");
        return;
    }
    queue_.push_back(std::move(request));
    update_gauges();
}

void Scheduler::cancel(uint64_t request_id) {
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
        if (it->id != request_id) continue;
        GenerationRequest r = std::move(*it);
        queue_.erase(it);
        ++stats_.n_requests_cancelled_total;
        GenerationSummary s;
        s.reason = FinishReason::Cancelled;
        s.prompt_tokens = uint32_t(r.prompt.size());
        r.sink->on_finished(s);
        update_gauges();
        return;
    }
    for (size_t i = 0; i < lanes_.size(); ++i)
        if (lanes_[i].request && lanes_[i].request->id == request_id) finish(int(i), FinishReason::Cancelled);
    update_gauges();
}

void Scheduler::cancel_all() {
    while (!queue_.empty()) cancel(queue_.front().id);
    for (size_t i = 0; i < lanes_.size(); ++i)
        if (lanes_[i].request) finish(int(i), FinishReason::Cancelled);
    update_gauges();
}

void Scheduler::fail_all(const std::string& why) {
    while (!queue_.empty()) {
        GenerationRequest r = std::move(queue_.front());
        queue_.pop_front();
        ++stats_.n_requests_rejected_total;
        r.sink->on_rejected(RejectReason::Unavailable, "the engine failed: " + why);
    }
    for (size_t i = 0; i < lanes_.size(); ++i)
        if (lanes_[i].request) finish(int(i), FinishReason::Failed);
    update_gauges();
}

int Scheduler::n_running() const {
    return int(std::count_if(lanes_.begin(), lanes_.end(), [](const Lane& l) { return l.request.has_value(); }));
}

bool Scheduler::has_requests() const { return !queue_.empty() || n_running() > 0; }

bool Scheduler::any_closing() const {
    return std::any_of(lanes_.begin(), lanes_.end(), [](const Lane& l) { return l.closing; });
}

bool Scheduler::has_work() const {
    if (n_running() > 0 || !in_flight_.empty()) return true;
    if (any_closing()) return true;
    // Queued work can start only if the head fits now; otherwise we wait for a deadline.
    return !queue_.empty() && uint64_t(queue_.front().prompt.size()) + queue_.front().max_tokens +
                                      verify_slack(queue_.front()) + reserved_tokens() <=
                                  options_.kv_capacity_tokens;
}

std::optional<Scheduler::Clock::time_point> Scheduler::next_deadline() const {
    // Checkpoints still being copied are delivered by a step: come back for them soon.
    std::optional<Clock::time_point> saves;
    if (backend_.saves_in_flight()) saves = Clock::now() + std::chrono::milliseconds(2);
    if (queue_.empty()) return saves;
    auto timeout = queue_.front().submitted + std::chrono::milliseconds(options_.pending_timeout_ms);
    return saves ? std::min(*saves, timeout) : timeout;
}

uint64_t Scheduler::reserved_tokens() const {
    uint64_t total = 0;
    for (const Lane& l : lanes_)
        if (l.request) total += l.request->prompt.size() + l.request->max_tokens + uint64_t(l.speculative.k);
        else if (l.closing) total += l.history.size() + 1; // its last sample is still to be fed
    return total;
}

Scheduler::~Scheduler() {
    try {
        end_step_in_flight(); // its results are dropped with their requests
        backend_.poll_saves(true); // checkpoints in flight land before the cache may go
    } catch (...) {
    }
}

void Scheduler::step() {
    backend_.poll_saves(false);
    Clock::time_point now = Clock::now();
    expire_queue(now);
    admit(now);
    if (n_running() > 0) ++stats_.n_steps_total;
    prefill_one_chunk();
    decode_batch();
    update_gauges();
}

void Scheduler::expire_queue(Clock::time_point now) {
    auto limit = std::chrono::milliseconds(options_.pending_timeout_ms);
    // FIFO order means the oldest are at the front.
    while (!queue_.empty() && now - queue_.front().submitted >= limit) {
        GenerationRequest r = std::move(queue_.front());
        queue_.pop_front();
        ++stats_.n_requests_rejected_total;
        r.sink->on_rejected(RejectReason::QueueTimeout, "request waited " + std::to_string(options_.pending_timeout_ms) +
                                                            " ms for a free lane");
    }
}

bool Scheduler::lane_extends(const Lane& l, const GenerationRequest& request) {
    const size_t h = l.history.size();
    return h > 0 && h < request.prompt.size() && std::equal(l.history.begin(), l.history.end(), request.prompt.begin()) &&
           media_prefix_equal(l.media, request.media_spans, h);
}

// The free lane whose sequence is the longest proper prefix of the prompt, else the
// lowest-numbered free lane (scanning upward, only a strictly longer match replaces a choice).
int Scheduler::pick_lane(const GenerationRequest& request) const {
    int best = -1;
    size_t best_reuse = 0;
    for (size_t i = 0; i < lanes_.size(); ++i) {
        const Lane& l = lanes_[i];
        if (l.request || l.closing) continue;
        size_t reuse = lane_extends(l, request) ? l.history.size() : 0;
        if (best < 0 || reuse > best_reuse) {
            best = int(i);
            best_reuse = reuse;
        }
    }
    return best;
}

void Scheduler::admit(Clock::time_point now) {
    // A closing lane is fed in this round's decode step: admission waits for it, so every free
    // lane holds its whole sequence when a lane is picked, in either decode order.
    if (any_closing()) return;
    while (!queue_.empty()) {
        const GenerationRequest& head = queue_.front();
        if (reserved_tokens() + head.prompt.size() + head.max_tokens + verify_slack(head) > options_.kv_capacity_tokens)
            return;
        int index = pick_lane(head);
        if (index < 0) return;
        Lane& lane = lanes_[size_t(index)];
        GenerationRequest r = std::move(queue_.front());
        queue_.pop_front();
        bool reuse = lane_extends(lane, r);
        if (options_.prefix_cache)
            reuse = restore_from_cache(index, r, reuse ? lane.history.size() : 0, now) || reuse;
        if (!reuse) {
            backend_.reset_lane(index);
            lane.history.clear();
        }
        lane.media = r.media_spans; // agrees with the reused prefix's; spans past history count once fed
        lane.cached_tokens = uint32_t(lane.history.size());
        lane.n_prefilled = lane.cached_tokens;
        lane.checkpoint_at = options_.prefix_cache ? assistant_boundary(r.prompt, lane.n_prefilled) : 0;
        lane.generated.clear();
        lane.pending_token = -1;
        lane.forced.clear();
        lane.decoding = false;
        lane.admitted = now;
        lane.admit_order = admit_counter_++;
        lane.speculative = speculation_of(r);
        lane.speculative.k = int(verify_slack(r));
        if (lane.speculative.k == 0) lane.speculative = {};
        lane.draft_n = lane.draft_n_accepted = 0;
        lane.gate.reset();
        lane.ngram.reset();
        if (lane.speculative.kind == SpeculativeKind::Ngram) lane.ngram.append(r.prompt);
        lane.constraint.reset();
        if (r.constraint) lane.constraint = std::make_unique<ReplyConstraint>(std::move(*r.constraint));
        r.constraint.reset();
        stats_.n_prompt_tokens_total += r.prompt.size();
        stats_.n_prompt_tokens_cached_total += lane.cached_tokens;
        auto sink = r.sink;
        lane.request = std::move(r);
        sink->on_admitted(index, lane.cached_tokens);
    }
}

// prefill_chunk, or prefill_chunk_decoding while some lane decodes (its next step waits for the chunk).
uint32_t Scheduler::chunk_tokens() const {
    if (options_.prefill_chunk_decoding == 0) return options_.prefill_chunk;
    for (const Lane& l : lanes_)
        if (l.request && l.decoding) return std::min(options_.prefill_chunk, options_.prefill_chunk_decoding);
    return options_.prefill_chunk;
}

// The prefilling lane with the fewest prompt tokens left goes first (ties: the earliest admitted),
// so a short request admitted during a long prompt's prefill waits one chunk, not the whole prompt:
// this minimises the mean time to first token, and the long prompt loses only the short ones' chunks.
void Scheduler::prefill_one_chunk() {
    if (slicing_) return advance_sliced_chunk(); // the chunk begun in slices goes on first
    int chosen = -1;
    auto left = [&](const Lane& l) { return l.request->prompt.size() - l.n_prefilled; };
    for (size_t i = 0; i < lanes_.size(); ++i) {
        const Lane& l = lanes_[i];
        if (!l.request || l.decoding) continue;
        if (chosen < 0) {
            chosen = int(i);
            continue;
        }
        const Lane& c = lanes_[size_t(chosen)];
        if (left(l) < left(c) || (left(l) == left(c) && l.admit_order < c.admit_order)) chosen = int(i);
    }
    if (chosen < 0) return;
    Lane& lane = lanes_[size_t(chosen)];
    const std::vector<int32_t>& prompt = lane.request->prompt;
    uint32_t n = std::min<uint32_t>(chunk_tokens(), uint32_t(prompt.size()) - lane.n_prefilled);
    if (lane.checkpoint_at > lane.n_prefilled) n = std::min(n, lane.checkpoint_at - lane.n_prefilled); // stop there
    std::span<const int32_t> chunk(prompt.data() + lane.n_prefilled, n);
    bool last = lane.n_prefilled + n == prompt.size();
    if (slice_chunk(lane)) return begin_sliced_chunk(chosen, chunk, last);
    auto t0 = Clock::now();
    if (!prefill_chunk(chosen, chunk, last ? LogitsOut::Last : LogitsOut::None)) return;
    chunk_prefilled(chosen, n, last, t0);
}

void Scheduler::chunk_prefilled(int chosen, uint32_t n, bool last, Clock::time_point t0) {
    Lane& lane = lanes_[size_t(chosen)];
    const std::vector<int32_t>& prompt = lane.request->prompt;
    lane.history.insert(lane.history.end(), prompt.begin() + lane.n_prefilled, prompt.begin() + lane.n_prefilled + n);
    lane.n_prefilled += n;
    stats_.n_prefill_tokens_total += n;
    if (!last) {
        stats_.t_prefill_us_total += us_between(t0, Clock::now());
        if (lane.n_prefilled == lane.checkpoint_at) checkpoint(chosen); // the assistant boundary
        return;
    }
    if (options_.prefix_cache) checkpoint(chosen); // end of the prompt
    SamplingParams sampling = lane.request->sampling;
    sampling.step = 0;
    if (lane.constraint && !constrain_sample(chosen, sampling)) return;
    DecodeResult first = backend_.sample_after_prefill(chosen, sampling, {}, lane.request->n_top_logprobs);
    lane.first_token = Clock::now();
    stats_.t_prefill_us_total += us_between(t0, lane.first_token);
    lane.decoding = true;
    accept_token(chosen, first);
}

bool Scheduler::accept_token(int lane_index, DecodeResult result) {
    Lane& lane = lanes_[size_t(lane_index)];
    if (!lane.forced.empty()) {
        result = DecodeResult{lane.forced.front(), 0.0f, {{lane.forced.front(), 0.0f}}};
        lane.forced.pop_front();
    }
    lane.generated.push_back(result.token);
    // A step begun after the one that sampled this token already feeds it (the pipelined order).
    if (lane.samples_outstanding > 0) {
        lane.history.push_back(result.token);
        lane.pending_token = -1;
    } else {
        lane.pending_token = result.token;
    }
    ++stats_.n_generation_tokens_total;
    if (lane.constraint && !lane.constraint->accept(result.token)) { // a forced id the grammar refuses
        finish(lane_index, FinishReason::ConstraintFailed);
        return false;
    }
    TokenVerdict verdict = lane.request->sink->on_token(result);
    if (verdict == TokenVerdict::Stop || is_stop_token(*lane.request, result.token) ||
        (lane.constraint && lane.constraint->finished())) {
        finish(lane_index, FinishReason::Stop);
        return false;
    }
    // The sequence counts every sampled token, fed or not, so both decode orders stop alike.
    if (lane.generated.size() >= lane.request->max_tokens ||
        lane.request->prompt.size() + lane.generated.size() >= options_.max_context) {
        finish(lane_index, FinishReason::Length);
        return false;
    }
    if (lane.forced.empty())
        for (int32_t id : lane.request->sink->forced_tokens()) lane.forced.push_back(id);
    return true;
}

// An n-gram lane whose next token is still on the device (a pipelined step in flight) and whose
// drafter can find no match whatever that token is: a round would draft nothing, so the step in
// flight is not ended for it (on the H100, ending it each step cost 8% at 4 streams of text that
// never repeats, session 21). Only a scheduling choice: the tokens are the same either way.
bool Scheduler::ngram_cannot_draft(Lane& l) {
    if (l.speculative.kind != SpeculativeKind::Ngram || l.samples_outstanding == 0 || options_.test_drafter)
        return false;
    catch_up_ngram(l);
    return !l.ngram.may_draft_after_next();
}

// The drafter holds the prompt and every token reported since: it takes the ones it lacks.
void Scheduler::catch_up_ngram(Lane& l) {
    const size_t known = l.ngram.tokens().size() - l.request->prompt.size();
    l.ngram.append(std::span(l.generated).subspan(known));
}

void Scheduler::decode_batch() {
    // Speculating lanes take a round instead of a plain step; a round needs their last samples.
    std::vector<bool> speculating(lanes_.size());
    uint32_t decoding = 0;
    for (const Lane& l : lanes_) decoding += l.request && l.decoding;
    const bool batch_ok = batch_allows(options_.speculation_policy, decoding);
    uint32_t candidates = 0;
    for (size_t i = 0; i < lanes_.size(); ++i) {
        Lane& l = lanes_[i];
        speculating[i] = batch_ok && l.request && l.decoding && l.speculative.on() && l.gate.allows() &&
                         !ngram_cannot_draft(l);
        candidates += speculating[i];
    }
    // Under 2 rows a lane in one verify pass, no round (checked here, before the pipelined step in
    // flight is ended for one: the plain steps keep their pipelining).
    if (const uint32_t pass = backend_.verify_rows_per_pass();
        options_.speculation_policy.fit_one_pass && pass > 0 && candidates > 0 && pass / candidates < 2)
        std::fill(speculating.begin(), speculating.end(), false);
    if (std::find(speculating.begin(), speculating.end(), true) != speculating.end()) {
        end_step_in_flight();
        speculative_round(speculating);
    }
    // A constrained lane's mask needs its previous sample. Known now: the mask is filled here.
    // Still in flight: this step begins without sampling, and the mask is filled once the step in
    // flight has ended, while the new step's forward pass runs (sample_constrained_later).
    const bool sample_later = constrained_sample_in_flight();
    for (size_t i = 0; i < lanes_.size(); ++i)
        if (lanes_[i].request && lanes_[i].decoding && lanes_[i].constraint && lanes_[i].samples_outstanding == 0 &&
            !speculating[i]) { // a lane that took a round samples in its next one
            SamplingParams unused;
            constrain_sample(int(i), unused); // fills lanes_[i].mask, or ends the request
        }
    std::vector<DecodeStep> steps;
    std::vector<StepRow> rows;
    std::vector<bool> fed_now; // the row's token is the lane's pending (known, unfed) sample
    std::deque<std::vector<int32_t>> with_forced; // generated + a forced id the step in flight reports
    for (size_t i = 0; i < lanes_.size(); ++i) {
        Lane& l = lanes_[i];
        DecodeStep s;
        s.lane = int(i);
        if (speculating[i] && l.request) continue; // it took a round
        if (l.request && l.decoding) {
            // Its token is the sample of the step in flight (on the device), or the forced id that
            // will replace that sample when it is reported, or a sample already reported.
            const bool from_step = l.samples_outstanding > 0;
            s.sampling = l.request->sampling;
            s.sampling.step = l.generated.size() + (from_step ? 1 : 0);
            if (l.constraint && !from_step) s.sampling.allowed_tokens = l.mask;
            s.generated = l.generated;
            s.n_top_logprobs = l.request->n_top_logprobs;
            if (!from_step) {
                s.token = l.pending_token;
            } else if (l.forced.empty()) {
                s.token = kTokenOfLastStep;
            } else {
                s.token = l.forced.front();
                with_forced.emplace_back(l.generated.begin(), l.generated.end()).push_back(s.token);
                s.generated = with_forced.back();
            }
            rows.push_back({int(i), false, l.admit_order});
            fed_now.push_back(!from_step);
        } else if (l.closing) {
            s.token = l.pending_token; // greedy; the result is discarded
            rows.push_back({int(i), true, 0});
            fed_now.push_back(true);
        } else {
            continue;
        }
        steps.push_back(std::move(s));
    }
    if (!steps.empty()) {
        auto t0 = Clock::now();
        try {
            if (sample_later)
                backend_.decode_begin_forward(steps);
            else
                backend_.decode_begin(steps);
        } catch (...) {
            // A failing backend: what the step in flight computed still reaches its requests.
            try {
                end_step_in_flight();
            } catch (...) {
            }
            throw;
        }
        stats_.t_decode_us_total += us_between(t0, Clock::now());
        ++stats_.n_decode_steps_total;
        stats_.n_decode_lane_steps_total += steps.size();
        for (size_t k = 0; k < rows.size(); ++k) {
            Lane& l = lanes_[size_t(rows[k].lane)];
            if (!rows[k].closing && l.speculative.on()) l.gate.after_plain_step();
            if (fed_now[k]) {
                l.history.push_back(steps[k].token);
                l.pending_token = -1;
            }
            if (rows[k].closing)
                lane_fed_last_sample(rows[k].lane);
            else
                ++l.samples_outstanding;
        }
    }
    // Pipelined: the step begun in the previous round is reported while this one computes.
    end_step_in_flight();
    if (sample_later && !steps.empty()) sample_constrained_later(steps, rows);
    in_flight_ = std::move(rows);
    if (!options_.pipeline_decode) end_step_in_flight();
}

void Scheduler::end_step_in_flight() {
    if (in_flight_.empty()) return;
    std::vector<StepRow> rows = std::move(in_flight_);
    in_flight_.clear();
    auto t0 = Clock::now();
    std::vector<DecodeResult> results = backend_.decode_end();
    stats_.t_decode_us_total += us_between(t0, Clock::now());
    const uint64_t cpu0 = thread_cpu_us();
    for (size_t k = 0; k < rows.size(); ++k) {
        Lane& l = lanes_[size_t(rows[k].lane)];
        // A closing lane's row, or a request that finished (or was cancelled) after this step began.
        if (rows[k].closing || !l.request || l.admit_order != rows[k].admission) continue;
        --l.samples_outstanding;
        accept_token(rows[k].lane, results[k]);
    }
    stats_.t_token_report_cpu_us_total += thread_cpu_us() - cpu0;
}

// A finished lane's last sample is in its state now: it is free, and its reply checkpoint is taken.
void Scheduler::lane_fed_last_sample(int lane_index) {
    Lane& l = lanes_[size_t(lane_index)];
    l.closing = false;
    if (l.checkpoint_when_fed) checkpoint(lane_index);
    l.checkpoint_when_fed = false;
}

void Scheduler::finish(int lane_index, FinishReason reason) {
    Lane& lane = lanes_[size_t(lane_index)];
    if (!lane.request) return;
    if (slicing_ && slicing_->lane == lane_index) slicing_.reset(); // reset_lane below abandons it in the backend
    GenerationRequest r = std::move(*lane.request);
    lane.request.reset();
    lane.vision.reset(); // a request cancelled while it prefilled leaves no tower rows behind
    lane.constraint.reset();
    Clock::time_point now = Clock::now();
    GenerationSummary s;
    s.reason = reason;
    s.lane = lane_index;
    s.prompt_tokens = uint32_t(r.prompt.size());
    s.cached_tokens = lane.cached_tokens;
    s.completion_tokens = uint32_t(lane.generated.size());
    s.queue_ms = ms_between(r.submitted, lane.admitted);
    bool sampled = !lane.generated.empty();
    s.prompt_ms = sampled ? ms_between(lane.admitted, lane.first_token) : ms_between(lane.admitted, now);
    s.decode_ms = sampled ? ms_between(lane.first_token, now) : 0.0;
    s.draft_n = lane.draft_n;
    s.draft_n_accepted = lane.draft_n_accepted;
    // A lane stopped in the middle of its prompt holds a state no later prompt can trust. After a
    // backend failure nothing calls into the backend again.
    if (reason == FinishReason::Failed) {
        lane.history.clear();
    } else if (!lane.decoding) {
        backend_.reset_lane(lane_index);
        lane.history.clear();
    } else {
        // The reply's checkpoint (the assistant boundary: the next turn extends it) includes the
        // last sample: taken now if a step in flight feeds it, else once the next round has.
        const bool keep = options_.prefix_cache && reason != FinishReason::Cancelled;
        lane.samples_outstanding = 0; // rows of this request still in flight are discarded
        if (lane.pending_token >= 0) {
            lane.closing = true;
            lane.checkpoint_when_fed = keep;
        } else if (keep) {
            checkpoint(lane_index);
        }
    }
    lane.decoding = false;
    if (reason == FinishReason::Cancelled || reason == FinishReason::Failed || reason == FinishReason::ConstraintFailed) {
        ++stats_.n_requests_cancelled_total; // ended before their reply was complete
    } else {
        ++stats_.n_requests_finished_total;
    }
    update_gauges(); // a client that reads status after its reply sees the lane as it was left
    r.sink->on_finished(s);
}

void Scheduler::update_gauges() {
    publish_cache_gauges(options_.prefix_cache, stats_);
    stats_.n_requests_running = n_running();
    stats_.n_requests_waiting = int(queue_.size());
    stats_.n_requests_prefilling =
        int(std::count_if(lanes_.begin(), lanes_.end(), [](const Lane& l) { return l.request && !l.decoding; }));
    stats_.kv_reserved_tokens = reserved_tokens();
    publish_lanes();
}

} // namespace ninfer::core
