// ninfer::core - simdjson DOM parsing plus the duplicate-member check simdjson does not do.
#include "core/artifact/json_strict.h"

#include "core/util/error.h"
#include "core/util/json_writer.h"

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

namespace {

// simdjson's own minify prints doubles with too few digits (9.99999997e-07 for f32(1e-6)), so
// values are re-serialised with JsonWriter: shortest round-trip doubles, ints kept as ints.
void write_element(JsonWriter& w, simdjson::dom::element e) {
    switch (e.type()) {
    case simdjson::dom::element_type::OBJECT:
        w.begin_object();
        for (auto field : simdjson::dom::object(e)) {
            w.key(field.key);
            write_element(w, field.value);
        }
        w.end_object();
        break;
    case simdjson::dom::element_type::ARRAY:
        w.begin_array();
        for (auto v : simdjson::dom::array(e))
            write_element(w, v);
        w.end_array();
        break;
    case simdjson::dom::element_type::STRING: w.value(e.get_string().value()); break;
    case simdjson::dom::element_type::INT64: w.value(e.get_int64().value()); break;
    case simdjson::dom::element_type::UINT64: w.value(e.get_uint64().value()); break;
    case simdjson::dom::element_type::DOUBLE: w.value(e.get_double().value()); break;
    case simdjson::dom::element_type::BOOL: w.value(e.get_bool().value()); break;
    case simdjson::dom::element_type::NULL_VALUE: w.null(); break;
    }
}

} // namespace

std::string json_text(simdjson::dom::element element) {
    JsonWriter w;
    write_element(w, element);
    return w.take();
}

} // namespace ninfer::core::detail
