// ninfer::core - stop strings over a streamed text, across token boundaries.
//
// Contract:
// - StopStringMatcher::feed(text) returns the part of the text seen so far that can no longer be
//   part of a stop string, holding back only the longest tail that is still a proper prefix of
//   some stop string. The stop string that completes first (at an equal end, the longest) ends
//   the stream, as checking after every token would: feed returns the text before it, matched() becomes true, matched_string() names it,
//   and later feeds return "". Empty stop strings are ignored.
// - flush() (end of generation without a match) returns the held-back text.
// - Concatenating every return value gives the input up to the first match, or all of it.
// - held_prefix_length(text, token) is the length of the longest proper prefix of `token` that
//   `text` ends with (the streaming hold-back rule, shared with the output parser).
// Thread safety: one matcher per stream.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ninfer::core {

size_t held_prefix_length(std::string_view text, std::string_view token);

class StopStringMatcher {
  public:
    explicit StopStringMatcher(std::vector<std::string> stops);

    std::string feed(std::string_view text);
    std::string flush();

    bool empty() const { return stops_.empty(); }
    bool matched() const { return matched_; }
    const std::string& matched_string() const { return matched_string_; }

  private:
    std::vector<std::string> stops_;
    std::string held_;
    bool matched_ = false;
    std::string matched_string_;
};

} // namespace ninfer::core
