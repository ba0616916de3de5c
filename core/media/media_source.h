// ninfer::core - where a media item's bytes come from: a data: URL (base64), or a file:// URL
// under the directory the server allows. Remote URLs are never fetched.
//
// Contract:
// - media_url_check(url) accepts "data:" and "file://" URLs and throws Error("media: ...") for
//   anything else: http(s) URLs with "remote media URLs are not fetched by this server; send the
//   bytes as a data: URL (base64)", other schemes with the scheme named. Cheap: the HTTP parsers
//   call it on the loop thread so the refusal names the request field.
// - media_source_bytes(url, allowed_local_dir, max_bytes) returns the bytes:
//   data:[<type>][;params];base64,<payload>: the payload decoded (standard or URL-safe alphabet,
//   padding optional, ASCII whitespace skipped); a payload that is not base64 or a data: URL
//   without ";base64" is refused; its decoded size is checked against max_bytes from the text's
//   length before anything is allocated.
//   file:///ABS/PATH (percent-escapes decoded): refused unless allowed_local_dir is set and the
//   path, with symlinks resolved, lies inside it (vLLM's --allowed-local-media-path); read through
//   read_regular_file (no FIFOs or devices), at most max_bytes.
//   Errors: Error("media: ...") of kind Invalid (a 400); a missing file is NotFound.
// Thread safety: reentrant (runs on the media pool).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer::core {

void media_url_check(std::string_view url);
std::vector<uint8_t> media_source_bytes(std::string_view url, const std::string& allowed_local_dir, uint64_t max_bytes);
// Standard or URL-safe base64, padding optional, whitespace skipped; nullopt-like failure throws.
std::vector<uint8_t> base64_decode(std::string_view text, uint64_t max_bytes);

} // namespace ninfer::core
