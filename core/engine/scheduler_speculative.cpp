// ninfer::core - the scheduler's speculative rounds: draft -> verify -> accept, reported as plain samples.
#include "core/backend/speculative.h"
#include "core/engine/constrained_drafts.h"
#include "core/engine/scheduler.h"
#include "core/util/thread_clock.h"
#include "core/util/error.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ninfer::core {
namespace {

// What a plain step reports for `token` drawn from these raw logits: its log-softmax and the top n.
DecodeResult result_of(std::span<const float> raw, int32_t token, bool logprobs, int n_top) {
    DecodeResult r;
    r.token = token;
    if (!logprobs && n_top == 0) return r; // nobody reads them: skip a pass over the vocabulary
    const float max = *std::max_element(raw.begin(), raw.end());
    double sum = 0;
    for (float x : raw) sum += std::exp(double(x) - double(max));
    const double lse = double(max) + std::log(sum);
    r.logprob = float(double(raw[size_t(token)]) - lse);
    if (n_top > 0) {
        std::vector<int32_t> ids(raw.size());
        std::iota(ids.begin(), ids.end(), 0);
        const size_t k = std::min(size_t(n_top), ids.size());
        std::partial_sort(ids.begin(), ids.begin() + long(k), ids.end(), [&](int32_t a, int32_t b) {
            return raw[size_t(a)] > raw[size_t(b)] || (raw[size_t(a)] == raw[size_t(b)] && a < b);
        });
        for (size_t i = 0; i < k; ++i) r.top_logprobs.push_back({ids[i], float(double(raw[size_t(ids[i])]) - lse)});
    }
    return r;
}

} // namespace

SpeculativeConfig parse_speculative(const std::string& text) {
    if (text == "off") return {};
    const size_t colon = text.find(':');
    const std::string kind = text.substr(0, colon), k = colon == std::string::npos ? "" : text.substr(colon + 1);
    SpeculativeConfig c;
    if (kind == "mtp") c.kind = SpeculativeKind::Mtp;
    else if (kind == "ngram") c.kind = SpeculativeKind::Ngram;
    if (c.kind == SpeculativeKind::Off || k.size() != 1 || k[0] < '1' || k[0] > char('0' + kMaxSpeculativeK))
        throw Error("speculative: '" + text + "' is not off, mtp:K or ngram:K with K in 1.." +
                    std::to_string(kMaxSpeculativeK));
    c.k = k[0] - '0';
    return c;
}

std::string speculative_name(const SpeculativeConfig& c) {
    if (!c.on()) return "off";
    return std::string(c.kind == SpeculativeKind::Mtp ? "mtp:" : "ngram:") + std::to_string(c.k);
}

SpeculativeConfig Scheduler::speculation_of(const GenerationRequest& request) const {
    const SpeculativeConfig server = options_.speculative;
    SpeculativeConfig want = request.speculative.value_or(server);
    if (!server.on() || !want.on()) return {};
    if (want.kind == SpeculativeKind::Mtp && server.kind != SpeculativeKind::Mtp) return {};
    want.k = std::min(want.k, server.k);
    // A constrained lane's drafts are checked against its grammar on the host before the verify:
    // n-gram drafts are host tokens anyway, so this adds no device synchronisation to the round
    // (the MTP head's drafts would have to come back first); the same K, drafted by prompt lookup.
    if (request.constraint) want.kind = SpeculativeKind::Ngram;
    return want;
}

uint32_t Scheduler::verify_slack(const GenerationRequest& request) const {
    const SpeculativeConfig c = speculation_of(request);
    const uint64_t need = request.prompt.size() + request.max_tokens;
    if (!c.on() || need >= options_.kv_capacity_tokens) return 0;
    return uint32_t(std::min<uint64_t>(uint64_t(c.k), options_.kv_capacity_tokens - need));
}

int Scheduler::round_drafts(const Lane& lane) const {
    if (!lane.request || !lane.decoding || !lane.speculative.on() || !lane.forced.empty() ||
        lane.pending_token < 0 || lane.samples_outstanding > 0)
        return 0;
    const GenerationRequest& r = *lane.request;
    const int64_t context = std::min<int64_t>(options_.max_context, backend_.max_context());
    // Tokens the round may still report (each draft accepted, then the bonus) and still fit.
    const int64_t room = std::min<int64_t>(int64_t(r.max_tokens) - int64_t(lane.generated.size()),
                                           context - int64_t(r.prompt.size() + lane.generated.size()));
    return int(std::clamp<int64_t>(room - 1, 0, lane.speculative.k));
}

void Scheduler::speculative_round(std::vector<bool>& speculating) {
    std::vector<int> lanes, ks;
    for (size_t i = 0; i < lanes_.size(); ++i) {
        if (!speculating[i]) continue;
        const int k = round_drafts(lanes_[i]);
        speculating[i] = k > 0;
        if (k > 0) lanes.push_back(int(i)), ks.push_back(k);
    }
    if (lanes.empty()) return;
    // Every window together fits one verify pass of the backend: more rows cost another pass each
    // (on the GPU, 16 rows at batch 4 and K = 3 made the round 2.66 x a step, where one pass of 8
    // rows costs about a batch-8 step, 1.2 x), so each lane's K is lowered to rows / lanes - 1
    // (at least 1: decode_batch started no round for under 2 rows a lane, and these lanes are
    // among the ones it counted).
    int fit = kMaxSpeculativeK;
    if (const uint32_t pass = backend_.verify_rows_per_pass(); pass > 0 && options_.speculation_policy.fit_one_pass) {
        fit = int(pass / uint32_t(lanes.size())) - 1;
        for (int& k : ks) k = std::min(k, fit);
    }
    const auto t0 = Clock::now();
    std::vector<std::vector<int32_t>> drafts(lanes.size());
    std::vector<DraftRequest> from_head;
    std::vector<size_t> head_of;
    for (size_t j = 0; j < lanes.size(); ++j) {
        Lane& l = lanes_[size_t(lanes[j])];
        const std::vector<int32_t>* carried = carried_drafts(l, ks[j]);
        if (carried) { // the last greedy round drafted them: the first K are what draft_mtp gives now
            drafts[j].assign(carried->begin(), carried->begin() + std::min<long>(ks[j], long(carried->size())));
        } else if (l.speculative.kind == SpeculativeKind::Mtp) {
            from_head.push_back({lanes[j], l.pending_token, ks[j]});
            head_of.push_back(j);
        } else {
            catch_up_ngram(l);
            drafts[j] = options_.test_drafter ? options_.test_drafter(l.ngram.tokens(), ks[j]) : l.ngram.draft(ks[j]);
        }
        l.carried.reset(); // used or stale
    }
    if (!from_head.empty()) {
        std::vector<std::vector<int32_t>> d = backend_.draft_mtp(from_head, nullptr);
        for (size_t q = 0; q < head_of.size(); ++q) drafts[head_of[q]] = std::move(d.at(q));
    }
    // Constrained lanes: the drafts the grammar refuses (and every one after) are cut here, never
    // verified; the masks of the verify rows come from the same walk through the grammar.
    const uint32_t V = backend_.vocab_size();
    std::vector<CheckedDrafts> checked(lanes.size());
    for (size_t j = 0; j < lanes.size(); ++j) {
        Lane& l = lanes_[size_t(lanes[j])];
        if (!l.constraint) continue;
        checked[j] = check_drafts(*l.constraint, drafts[j], V);
        stats_.n_spec_draft_tokens_refused_total += drafts[j].size() - checked[j].kept;
        drafts[j].resize(checked[j].kept);
        if (token_mask_count(std::span(checked[j].masks).first(token_mask_words(V)), V) == 0)
            finish(lanes[j], FinishReason::ConstraintFailed); // as its plain step would: nothing allowed
    }
    for (size_t j = lanes.size(); j-- > 0;) // a lane ended above leaves the round (its closing row is fed later)
        if (!lanes_[size_t(lanes[j])].request) {
            lanes.erase(lanes.begin() + long(j)), drafts.erase(drafts.begin() + long(j));
            checked.erase(checked.begin() + long(j));
        }
    if (lanes.empty()) return;
    std::vector<std::vector<int32_t>> windows(lanes.size());
    std::vector<VerifyStep> steps;
    for (size_t j = 0; j < lanes.size(); ++j) {
        windows[j] = {lanes_[size_t(lanes[j])].pending_token};
        windows[j].insert(windows[j].end(), drafts[j].begin(), drafts[j].end());
        steps.push_back({lanes[j], windows[j]});
    }
    // Lanes accepted greedily from the rows' argmax alone take only their ids back from the
    // backend (on the GPU the rows never leave the device); the others get their rows.
    std::vector<uint8_t> want_rows(lanes.size());
    for (size_t j = 0; j < lanes.size(); ++j) {
        const Lane& l = lanes_[size_t(lanes[j])];
        want_rows[j] = !greedy_fast_path(l.request->sampling, l.constraint != nullptr, l.request->logprobs,
                                         l.request->n_top_logprobs);
    }
    if (backend_.greedy_rounds_in_one_call() && std::find(want_rows.begin(), want_rows.end(), 1) == want_rows.end()) {
        greedy_round(lanes, drafts, windows, fit);
        stats_.t_decode_us_total += us_between(t0, Clock::now());
        return;
    }
    std::vector<float> rows;
    std::vector<int32_t> ids;
    backend_.verify_greedy(steps, want_rows, rows, ids);
    stats_.n_graph_capture_failures_total = backend_.graph_capture_failures();
    stats_.t_decode_us_total += us_between(t0, Clock::now());
    ++stats_.n_decode_steps_total;
    stats_.n_decode_lane_steps_total += lanes.size();
    size_t at = 0, id_at = 0;
    for (size_t j = 0; j < lanes.size(); ++j) {
        Lane& l = lanes_[size_t(lanes[j])];
        const std::span<const int32_t> lane_ids = std::span(ids).subspan(id_at, windows[j].size());
        id_at += windows[j].size();
        if (!want_rows[j]) {
            report_round(lanes[j], drafts[j], {}, accept_greedy_ids(lane_ids, drafts[j]));
            continue;
        }
        const std::span<float> lane_rows(rows.data() + at * V, windows[j].size() * V);
        at += windows[j].size();
        const std::vector<float> raw(lane_rows.begin(), lane_rows.end()); // accept_drafts modifies rows
        SamplingParams p = l.request->sampling;
        p.step = l.generated.size();
        const DraftAcceptance a = l.constraint ? accept_masked_drafts(lane_rows, V, checked[j].masks, drafts[j], p, l.generated)
                                               : accept_drafts(lane_rows, V, drafts[j], p, l.generated);
        report_round(lanes[j], drafts[j], raw, a);
    }
}

// The round's tokens are reported one by one as plain samples would be. The window [pending sample,
// drafts] is in the lane; it keeps the pending sample and every reported draft followed by another
// reported token, so the last reported token is pending like any sample (fed by the next step, or
// by a closing row when the request finished). raw_rows is empty for a greedy fast-path lane
// (nothing reads its rows: no logprobs).
uint32_t Scheduler::report_round(int lane_index, std::span<const int32_t> drafts, std::span<const float> raw_rows,
                                 const DraftAcceptance& a, uint32_t kept_by_backend) {
    Lane& l = lanes_[size_t(lane_index)];
    const size_t V = backend_.vocab_size();
    ++stats_.n_spec_rounds_total;
    stats_.n_spec_draft_tokens_total += drafts.size();
    stats_.n_spec_accepted_tokens_total += a.accepted;
    for (uint32_t i = 0; i < a.accepted && i < stats_.n_spec_accepted_per_pos.size(); ++i)
        ++stats_.n_spec_accepted_per_pos[i];
    l.draft_n += uint32_t(drafts.size());
    l.draft_n_accepted += a.accepted;
    const uint32_t pauses = l.gate.pauses();
    l.gate.after_round(uint32_t(drafts.size()), a.accepted, options_.speculation_policy);
    stats_.n_spec_lane_pauses_total += l.gate.pauses() - pauses;
    l.history.push_back(l.pending_token);
    l.pending_token = -1;
    uint32_t kept = 1;
    const int n_top = l.request->n_top_logprobs;
    const uint64_t cpu0 = thread_cpu_us();
    for (uint32_t i = 0; i <= a.accepted; ++i) {
        const int32_t token = i < a.accepted ? drafts[i] : a.next_token;
        const bool replaced = !l.forced.empty(); // a forced id takes this token's place: the run ends
        const std::span<const float> raw = raw_rows.empty() ? raw_rows : raw_rows.subspan(size_t(i) * V, V);
        if (!accept_token(lane_index, result_of(raw, token, l.request->logprobs, n_top)) || replaced ||
            i == a.accepted)
            break;
        l.history.push_back(token); // an accepted draft, already in the lane
        l.pending_token = -1;
        ++kept;
    }
    stats_.t_token_report_cpu_us_total += thread_cpu_us() - cpu0;
    if (kept != kept_by_backend) backend_.accept_verified(lane_index, kept); // a greedy round's keep, or fewer
    return kept;
}

const std::vector<int32_t>* Scheduler::carried_drafts(const Lane& l, int k) const {
    if (!l.carried) return nullptr;
    const Lane::CarriedDrafts& c = *l.carried;
    // No drafts (a backend that gave none near max-context) is never carried: draft_mtp decides.
    const bool valid = l.speculative.kind == SpeculativeKind::Mtp && !c.ids.empty() && c.admission == l.admit_order &&
                       c.after == l.pending_token && c.at_history == l.history.size() && k <= c.asked;
    return valid ? &c.ids : nullptr;
}

int Scheduler::next_round_drafts(const Lane& l, int fit) const {
    if (l.speculative.kind != SpeculativeKind::Mtp || !backend_.has_mtp()) return 0;
    const GenerationRequest& r = *l.request;
    const int64_t context = std::min<int64_t>(options_.max_context, backend_.max_context());
    const int64_t room = std::min<int64_t>(int64_t(r.max_tokens) - int64_t(l.generated.size()),
                                           context - int64_t(r.prompt.size() + l.generated.size()));
    // This round reports one token at least: round_drafts' room - 1 is then at most room - 2.
    return int(std::clamp<int64_t>(room - 2, 0, std::min(l.speculative.k, fit)));
}

void Scheduler::greedy_round(const std::vector<int>& lanes, const std::vector<std::vector<int32_t>>& drafts,
                             const std::vector<std::vector<int32_t>>& windows, int fit) {
    std::vector<GreedyRoundStep> steps;
    for (size_t j = 0; j < lanes.size(); ++j)
        steps.push_back({lanes[j], windows[j], next_round_drafts(lanes_[size_t(lanes[j])], fit), 0});
    GreedyRoundResult res;
    backend_.verify_accept_greedy(steps, res);
    stats_.n_graph_capture_failures_total = backend_.graph_capture_failures();
    ++stats_.n_decode_steps_total;
    stats_.n_decode_lane_steps_total += lanes.size();
    size_t id_at = 0;
    for (size_t j = 0; j < lanes.size(); ++j) {
        const std::span<const int32_t> ids = std::span(res.ids).subspan(id_at, windows[j].size());
        id_at += windows[j].size();
        // The host's own acceptance from the ids must be the backend's (on the GPU, a device kernel's).
        const uint32_t n_keep = res.n_keep.at(j);
        if (n_keep != accept_greedy_ids(ids, drafts[j]).accepted + 1)
            throw Error(Errc::Internal, "scheduler: the backend kept " + std::to_string(n_keep) + " tokens of lane " +
                                            std::to_string(lanes[j]) + "'s window, its ids accept " +
                                            std::to_string(accept_greedy_ids(ids, drafts[j]).accepted + 1));
        const DraftAcceptance a{n_keep - 1, ids[n_keep - 1]};
        const uint32_t kept = report_round(lanes[j], drafts[j], {}, a, n_keep);
        Lane& l = lanes_[size_t(lanes[j])];
        if (l.request && kept == n_keep && steps[j].next_k > 0)
            l.carried = Lane::CarriedDrafts{std::move(res.drafts.at(j)), steps[j].next_k, a.next_token, l.history.size(),
                                            l.admit_order};
    }
}

} // namespace ninfer::core
