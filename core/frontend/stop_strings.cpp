// Stop strings across token boundaries, holding back only text that may still start a match.
#include "core/frontend/stop_strings.h"

#include <algorithm>

namespace ninfer::core {

size_t held_prefix_length(std::string_view text, std::string_view token) {
    for (size_t k = std::min(text.size(), token.size() - (token.empty() ? 0 : 1)); k > 0; --k)
        if (text.substr(text.size() - k) == token.substr(0, k)) return k;
    return 0;
}

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) {
    for (std::string& s : stops)
        if (!s.empty()) stops_.push_back(std::move(s));
}

std::string StopStringMatcher::feed(std::string_view text) {
    if (matched_) return {};
    held_ += text;
    // The stop string that completes first ends the stream (what checking after every token
    // would find); at an equal end the longer one, which starts earlier.
    size_t best = std::string::npos, best_end = std::string::npos;
    for (const std::string& stop : stops_) {
        const size_t at = held_.find(stop);
        if (at == std::string::npos) continue;
        const size_t end = at + stop.size();
        if (end < best_end || (end == best_end && at < best)) {
            best = at;
            best_end = end;
            matched_string_ = stop;
        }
    }
    if (best != std::string::npos) {
        matched_ = true;
        std::string out = held_.substr(0, best);
        held_.clear();
        return out;
    }
    size_t hold = 0;
    for (const std::string& stop : stops_) hold = std::max(hold, held_prefix_length(held_, stop));
    std::string out = held_.substr(0, held_.size() - hold);
    held_.erase(0, held_.size() - hold);
    return out;
}

std::string StopStringMatcher::flush() {
    std::string out;
    out.swap(held_);
    return out;
}

} // namespace ninfer::core
