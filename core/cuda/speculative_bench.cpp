// ninfer::core - the speculative round's cost: draft, verify, accept with forced acceptance (bench).
#include "core/cuda/speculative_bench.h"

#include "core/backend/speculative.h"
#include "core/cuda/cuda_backend.h"
#include "core/util/error.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

namespace ninfer::core {

namespace {

using Clock = std::chrono::steady_clock;

// Drafts accepted in round s under acceptance fraction f of k: the 75% pattern spreads 0.75 k a
// round evenly (k = 3: 3, 2, 2, 2, ...), f = 1 accepts all.
uint32_t forced_accepted(double f, int k, int s) {
    return uint32_t(std::floor(f * k * (s + 1) + 1e-9) - std::floor(f * k * s + 1e-9));
}

struct RoundResult {
    double seconds = 0;
    uint32_t kept = 0; // tokens kept per lane (the same for every lane)
};

// One round on every lane. Split: drafts (draft_mtp), verify_greedy, the host's acceptance pass,
// accept_verified. Fused: one verify_accept_greedy with the kept count forced, whose MTP drafts
// (carried) are the next round's; the first round drafts with draft_mtp as the scheduler's does.
RoundResult run_round(Backend& b, const SpecBenchSetup& st, double fraction, int s, std::vector<int32_t>& next,
                      bool fused, std::vector<std::vector<int32_t>>& carried) {
    const auto t0 = Clock::now();
    std::vector<std::vector<int32_t>> windows(size_t(st.batch));
    if (st.mtp) {
        std::vector<DraftRequest> req;
        for (int l = 0; l < st.batch; ++l)
            if (!fused || carried[size_t(l)].empty()) req.push_back({l, next[size_t(l)], st.k});
        std::vector<std::vector<int32_t>> d;
        if (!req.empty()) d = b.draft_mtp(req, nullptr);
        for (size_t q = 0; q < req.size(); ++q) carried[size_t(req[q].lane)] = std::move(d[q]);
        for (int l = 0; l < st.batch; ++l) {
            windows[size_t(l)] = {next[size_t(l)]};
            windows[size_t(l)].insert(windows[size_t(l)].end(), carried[size_t(l)].begin(), carried[size_t(l)].end());
            carried[size_t(l)].clear();
        }
    } else {
        for (int l = 0; l < st.batch; ++l) {
            windows[size_t(l)] = {next[size_t(l)]};
            for (int j = 1; j <= st.k; ++j)
                windows[size_t(l)].push_back(int32_t((uint32_t(l) * 131u + uint32_t(s * (st.k + 1) + j) * 7919u) %
                                                     st.token_ids));
        }
    }
    uint32_t kept = 0;
    if (fused) {
        std::vector<GreedyRoundStep> steps;
        for (int l = 0; l < st.batch; ++l) {
            const std::vector<int32_t>& w = windows[size_t(l)];
            kept = std::min<uint32_t>(forced_accepted(fraction, st.k, s), uint32_t(w.size() - 1)) + 1;
            steps.push_back({l, w, st.mtp ? st.k : 0, kept});
        }
        GreedyRoundResult res;
        b.verify_accept_greedy(steps, res);
        size_t at = 0;
        for (int l = 0; l < st.batch; ++l) {
            next[size_t(l)] = res.ids.at(at + res.n_keep.at(size_t(l)) - 1);
            at += windows[size_t(l)].size();
            carried[size_t(l)] = std::move(res.drafts.at(size_t(l)));
        }
        return {std::chrono::duration<double>(Clock::now() - t0).count(), kept};
    }
    std::vector<VerifyStep> steps;
    for (int l = 0; l < st.batch; ++l) steps.push_back({l, windows[size_t(l)]});
    // The scheduler's greedy path: the rows' greedy ids come back, the rows stay on the device.
    std::vector<float> rows;
    std::vector<int32_t> ids;
    b.verify_greedy(steps, std::vector<uint8_t>(steps.size(), 0), rows, ids);
    size_t at = 0;
    for (int l = 0; l < st.batch; ++l) {
        const std::vector<int32_t>& w = windows[size_t(l)];
        const std::span<const int32_t> drafts = std::span(w).subspan(1);
        const DraftAcceptance a = accept_greedy_ids(std::span(ids).subspan(at, w.size()), drafts);
        at += w.size();
        kept = std::min<uint32_t>(forced_accepted(fraction, st.k, s), uint32_t(drafts.size())) + 1;
        b.accept_verified(l, kept);
        next[size_t(l)] = a.next_token;
    }
    return {std::chrono::duration<double>(Clock::now() - t0).count(), kept};
}

} // namespace

void bench_speculative_rounds(Backend& b, const SpecBenchSetup& st, std::vector<SpecBenchRow>& out) {
    if (st.mtp && !b.has_mtp())
        throw Error("bench: --speculative mtp:K needs the MTP head (an artifact or synthetic weights with one)");
    // split; fused, launched eagerly; fused, as one graph per shape (captured in the warm-up).
    for (const char* mode : {"split", "fused", "graph"})
    for (const auto& [label, fraction] : {std::pair<const char*, double>{"all", 1.0}, {"75%", 0.75}}) {
        const bool fused = std::string(mode) != "split", graph = std::string(mode) == "graph";
        const size_t graphs_before = set_cuda_round_graphs(b, graph);
        const uint64_t free_before = cuda_free_bytes();
        for (int l = 0; l < st.batch; ++l) b.restore_lane(l, *st.image);
        std::vector<std::vector<int32_t>> carried(size_t(st.batch));
        // One plain step first: a restored lane gives the head its first pending row this way.
        std::vector<DecodeStep> first(size_t(st.batch));
        for (int l = 0; l < st.batch; ++l) {
            first[size_t(l)].lane = l;
            first[size_t(l)].token = int32_t((uint32_t(l) * 7919u + 101u) % st.token_ids);
        }
        std::vector<int32_t> next;
        for (const DecodeResult& r : b.decode(first)) next.push_back(r.token);
        run_round(b, st, fraction, 0, next, fused, carried); // warm-up: the window and round graphs are captured
        const size_t graphs = graph ? set_cuda_round_graphs(b, true) : 0;
        const double graph_mib = graphs > graphs_before
                                     ? double(int64_t(free_before) - int64_t(cuda_free_bytes())) /
                                           double(graphs - graphs_before) / double(1 << 20)
                                     : 0;
        std::vector<double> times;
        double kept_total = 0;
        for (int s = 0; s < st.rounds; ++s) {
            const RoundResult r = run_round(b, st, fraction, s, next, fused, carried);
            times.push_back(r.seconds);
            kept_total += r.kept;
        }
        std::sort(times.begin(), times.end());
        const size_t n = times.size();
        SpecBenchRow row;
        row.drafter = st.mtp ? "mtp" : "ngram";
        row.k = st.k;
        row.batch = st.batch;
        row.depth = st.depth;
        row.accept = label;
        row.round = mode;
        row.round_graphs = graphs;
        row.graph_mib = graph_mib;
        row.rounds = st.rounds;
        row.tokens_per_round = kept_total / std::max(1, st.rounds);
        row.round_ms = 1e3 * (n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]));
        row.min_round_ms = 1e3 * times.front();
        row.max_round_ms = 1e3 * times.back();
        row.step_ms = st.step_ms;
        row.cost_x = st.step_ms > 0 ? row.round_ms / st.step_ms : 0;
        row.tokens_per_s = st.batch * row.tokens_per_round / (row.round_ms * 1e-3);
        out.push_back(row);
    }
}

std::string spec_bench_row_text(const SpecBenchRow& r) {
    char floor[96] = "";
    if (r.floor_ms > 0)
        std::snprintf(floor, sizeof floor, "; floor: a batch-%d step, %.3f ms = %.2fx", r.batch * (r.k + 1), r.floor_ms,
                      r.floor_ms / r.step_ms);
    char graphs[96] = "";
    if (r.round_graphs > 0)
        std::snprintf(graphs, sizeof graphs, "; %zu round graphs, %.2f MiB of device memory each", r.round_graphs,
                      r.graph_mib);
    char line[480];
    std::snprintf(line, sizeof line,
                  "speculative %s:%d batch %d depth %u accept %s round %s: %.2f tokens/round, round %.3f ms = %.2fx a "
                  "step (%.3f ms)%s, %.1f tok/s (median of %d rounds; min %.3f, max %.3f ms%s)\n",
                  r.drafter.c_str(), r.k, r.batch, r.depth, r.accept.c_str(), r.round.c_str(), r.tokens_per_round,
                  r.round_ms, r.cost_x,
                  r.step_ms, floor, r.tokens_per_s, r.rounds, r.min_round_ms, r.max_round_ms, graphs);
    return line;
}

} // namespace ninfer::core
