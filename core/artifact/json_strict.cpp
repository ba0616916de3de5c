// ninfer::core - simdjson DOM parsing plus the duplicate-member check simdjson does not do.
#include "core/artifact/json_strict.h"

#include "core/util/error.h"

#include <algorithm>
#include <vector>

namespace ninfer::core::detail {
namespace {

void check_duplicates(simdjson::dom::element e, const std::string& prefix) {
    if (e.is_object()) {
        std::vector<std::string_view> keys;
        for (auto field : simdjson::dom::object(e)) {
            keys.push_back(field.key);
            check_duplicates(field.value, prefix);
        }
        std::sort(keys.begin(), keys.end());
        auto dup = std::adjacent_find(keys.begin(), keys.end());
        if (dup != keys.end())
            throw Error(prefix + "duplicate JSON member \"" + std::string(*dup) + "\"");
    } else if (e.is_array()) {
        for (auto v : simdjson::dom::array(e))
            check_duplicates(v, prefix);
    }
}

} // namespace

simdjson::dom::element parse_json_strict(simdjson::dom::parser& parser, std::string_view text,
                                         const std::string& prefix) {
    simdjson::dom::element root;
    auto err = parser.parse(text.data(), text.size()).get(root);
    if (err)
        throw Error(prefix + "invalid JSON directory: " + simdjson::error_message(err));
    check_duplicates(root, prefix);
    return root;
}

std::string json_text(simdjson::dom::element element) { return simdjson::minify(element); }

} // namespace ninfer::core::detail
