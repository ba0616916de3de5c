// ninfer::core - media bytes from data: URLs (base64) and allowed file:// paths; remote URLs refused.
#include "core/media/media_source.h"

#include "core/util/error.h"
#include "core/util/regular_file.h"

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace ninfer::core {
namespace {

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
    if (s.size() < prefix.size()) return false;
    for (size_t i = 0; i < prefix.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
    return true;
}

int base64_value(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
}

std::string too_large(uint64_t max_bytes) {
    return "media: the item is larger than this server's " + std::to_string(max_bytes >> 20) +
           " MiB of media a request (ninferd --media-max-mib)";
}

std::string percent_decoded(std::string_view s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
            std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
            out += char(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
            i += 2;
        } else {
            out += s[i];
        }
    }
    return out;
}

std::string real_path(const std::string& path) {
    std::unique_ptr<char, decltype(&std::free)> p(realpath(path.c_str(), nullptr), &std::free);
    if (!p) throw Error(errc_of_errno(errno), "media: " + path + ": " + std::strerror(errno));
    return p.get();
}

std::vector<uint8_t> local_file(std::string_view url, const std::string& allowed_dir, uint64_t max_bytes) {
    if (allowed_dir.empty())
        throw Error("media: file:// URLs are refused unless the server names a directory for them "
                    "(ninferd --allowed-local-media-path DIR)");
    const std::string path = percent_decoded(url.substr(7));
    if (path.empty() || path[0] != '/') throw Error("media: a file:// URL needs an absolute path (file:///DIR/NAME)");
    const std::string dir = real_path(allowed_dir), file = real_path(path);
    if (file.compare(0, dir.size(), dir) != 0 || (file.size() > dir.size() && file[dir.size()] != '/' && dir != "/"))
        throw Error("media: " + path + " is outside the allowed media directory " + allowed_dir);
    const std::string bytes = read_regular_file(file, "media", size_t(max_bytes));
    return {bytes.begin(), bytes.end()};
}

} // namespace

void media_url_check(std::string_view url) {
    if (starts_with_nocase(url, "data:") || starts_with_nocase(url, "file://")) return;
    if (starts_with_nocase(url, "http://") || starts_with_nocase(url, "https://"))
        throw Error("media: remote media URLs are not fetched by this server; send the bytes as a data: URL (base64)");
    const size_t colon = url.find(':');
    throw Error("media: unsupported media URL" + (colon != std::string_view::npos && colon < 16
                                                      ? " scheme '" + std::string(url.substr(0, colon)) + "'"
                                                      : std::string()) +
                "; send the bytes as a data: URL (base64)");
}

std::vector<uint8_t> base64_decode(std::string_view text, uint64_t max_bytes) {
    if (text.size() / 4 * 3 > max_bytes + 3) throw Error(too_large(max_bytes));
    std::vector<uint8_t> out;
    out.reserve(text.size() / 4 * 3 + 3);
    uint32_t acc = 0;
    int bits = 0;
    size_t i = 0;
    for (; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '=') break;
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
        const int v = base64_value(c);
        if (v < 0) throw Error("media: the data: URL's payload is not base64 (byte " + std::to_string(i) + ")");
        acc = acc << 6 | uint32_t(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out.push_back(uint8_t(acc >> bits));
        }
    }
    for (; i < text.size(); ++i)
        if (text[i] != '=' && text[i] != ' ' && text[i] != '\n' && text[i] != '\r' && text[i] != '\t')
            throw Error("media: the data: URL's payload has bytes after its padding");
    if (bits >= 6) throw Error("media: the data: URL's payload is truncated base64");
    if (out.size() > max_bytes) throw Error(too_large(max_bytes));
    return out;
}

std::vector<uint8_t> media_source_bytes(std::string_view url, const std::string& allowed_local_dir, uint64_t max_bytes) {
    media_url_check(url);
    if (starts_with_nocase(url, "file://")) return local_file(url, allowed_local_dir, max_bytes);
    const size_t comma = url.find(',');
    if (comma == std::string_view::npos) throw Error("media: a data: URL without a ',' before its payload");
    const std::string_view header = url.substr(5, comma - 5);
    if (header.size() < 7 || !starts_with_nocase(header.substr(header.size() - 7), ";base64"))
        throw Error("media: only base64 data: URLs are taken (data:image/png;base64,...)");
    return base64_decode(url.substr(comma + 1), max_bytes);
}

} // namespace ninfer::core
