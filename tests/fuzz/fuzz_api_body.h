// ninfer fuzz - the check every API request-body target makes: bad input is a 4xx, never a 500.
//
// Contract: check_body_parser(data, n, parse) calls parse(body) on the input as text. It returns
// normally when parse succeeds or throws what daemon/routes.cpp answers with a 4xx: an ApiError
// below 500, a simdjson error (routes.cpp's "unexpected shape" 400) or a ninfer::Error whose kind
// maps below 500 (api_error_of). Anything else (an ApiError >= 500, an Errc that maps to 500, any
// other exception) prints the input's fate and aborts, so libFuzzer records the input as a crash.
#pragma once

#include "daemon/api_error.h"

#include <simdjson.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace ninfer::fuzz {

[[noreturn]] inline void fail_as_server_error(int status, const char* what) {
    std::fprintf(stderr, "fuzz: bad input answered with HTTP %d (not 4xx): %s\n", status, what);
    std::abort();
}

template <typename Parse> void check_body_parser(const uint8_t* data, size_t n, Parse&& parse) {
    std::string_view body(reinterpret_cast<const char*>(data), n);
    try {
        parse(body);
    } catch (const daemon::ApiError& e) {
        if (e.status >= 500) fail_as_server_error(e.status, e.message.c_str());
    } catch (const simdjson::simdjson_error&) {
        // routes.cpp answers 400 "request body has an unexpected shape"
    } catch (const std::exception& e) {
        daemon::ApiError mapped = daemon::api_error_of(error_info(e));
        if (mapped.status >= 500) fail_as_server_error(mapped.status, e.what());
    }
}

} // namespace ninfer::fuzz
