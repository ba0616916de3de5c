// ninfer::daemon - how an option's text becomes its DaemonConfig field: one maker per field shape.
//
// Contract:
// - An OptionField binds one option-table row to one DaemonConfig member: store() parses the
//   row's validated text (Settings::set has checked kind and range) into the member; copy() moves
//   that member from one config to another (what SIGHUP does for a reloadable row).
// - Makers: text_field (std::string), integer_field<M, SHIFT> (any integer member; the value is
//   shifted left by SHIFT, so MiB -> bytes is SHIFT 20), bool_field, auto_or_integer_field ("auto"
//   -> 0), list_field (comma-separated, blanks dropped), key_file_field (appends the non-comment
//   lines of the named file; throws ninfer::Error("config: ...") if it is unreadable or holds no
//   key), sampling_field<&core::SamplingDefaults::F> (a Number row: "" = unset, defer to the
//   model's generation_config.json; into DaemonConfig::sampling), number_field (a Number row
//   with a default into a floating-point member). Rows that share a member (api-key, api-key-file) are stored in table order, so the
//   appending row comes after the assigning one.
// - read_text_file reads a regular file of at most 16 MiB (core/util/regular_file.h: a directory,
//   FIFO or device is refused without blocking) or throws ninfer::Error("config: PATH: reason").
#pragma once

#include "daemon/daemon_config.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace ninfer::daemon {

struct OptionField {
    void (*store)(DaemonConfig& config, std::string_view text) = nullptr; // null: sets no field
    void (*copy)(DaemonConfig& to, const DaemonConfig& from) = nullptr;
};

int64_t option_integer(std::string_view text); // validated decimal text -> number (0 if none)
std::optional<double> option_number(std::string_view text); // "" or not a number -> nullopt
bool option_number_in(std::string_view text, int64_t min_thousandths, int64_t max_thousandths);
bool option_bool(std::string_view text);       // true/yes/on/1 -> true
std::vector<std::string> split_list(std::string_view text, char separator);
std::string read_text_file(const std::string& path);
std::vector<std::string> read_key_file(const std::string& path);

namespace detail {
template <auto M> using field_t = std::remove_cvref_t<decltype(std::declval<DaemonConfig&>().*M)>;
template <auto M> void copy_member(DaemonConfig& to, const DaemonConfig& from) { to.*M = from.*M; }
} // namespace detail

template <auto M> constexpr OptionField text_field() {
    return {[](DaemonConfig& c, std::string_view v) { c.*M = std::string(v); }, detail::copy_member<M>};
}

template <auto M, unsigned SHIFT = 0> constexpr OptionField integer_field() {
    return {[](DaemonConfig& c, std::string_view v) {
                c.*M = static_cast<detail::field_t<M>>(uint64_t(option_integer(v)) << SHIFT);
            },
            detail::copy_member<M>};
}

template <auto M> constexpr OptionField bool_field() {
    return {[](DaemonConfig& c, std::string_view v) { c.*M = option_bool(v); }, detail::copy_member<M>};
}

template <auto M> constexpr OptionField auto_or_integer_field() {
    return {[](DaemonConfig& c, std::string_view v) {
                c.*M = v == "auto" ? 0 : static_cast<detail::field_t<M>>(option_integer(v));
            },
            detail::copy_member<M>};
}

template <auto F> constexpr OptionField sampling_field() {
    return {[](DaemonConfig& c, std::string_view v) {
                using T = typename std::remove_cvref_t<decltype(c.sampling.*F)>::value_type;
                std::optional<double> n = option_number(v);
                c.sampling.*F = n ? std::optional<T>(static_cast<T>(*n)) : std::nullopt;
            },
            [](DaemonConfig& to, const DaemonConfig& from) { to.sampling.*F = from.sampling.*F; }};
}
template <auto M> constexpr OptionField number_field() {
    return {[](DaemonConfig& c, std::string_view v) { c.*M = static_cast<detail::field_t<M>>(option_number(v).value_or(0)); },
            detail::copy_member<M>};
}

template <auto M> constexpr OptionField list_field() {
    return {[](DaemonConfig& c, std::string_view v) { c.*M = split_list(v, ','); }, detail::copy_member<M>};
}

template <auto M> constexpr OptionField key_file_field() {
    return {[](DaemonConfig& c, std::string_view v) {
                if (v.empty()) return;
                for (std::string& key : read_key_file(std::string(v))) (c.*M).push_back(std::move(key));
            },
            detail::copy_member<M>};
}

} // namespace ninfer::daemon
