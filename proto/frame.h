// ninfer::proto - control protocol frames: header, op numbers, status codes (PROTOCOL.md).
//
// Contract:
// - A frame is a 32-byte little-endian header followed by `payload_bytes` of typed payload:
//     u32 magic 'NICP' | u16 version | u16 op | u16 flags | u16 reserved (0) | i32 status |
//     u64 request_id | u32 payload_bytes (<= kMaxPayloadBytes) | u32 reserved (0)
// - Op numbers are append-only and never renumbered. Reserved fields must be zero.
// - FrameDecoder consumes bytes as they arrive (any split) and yields whole frames. A bad magic,
//   unknown version, nonzero reserved field or oversize payload is a protocol error: the decoder
//   stops and reports it; the connection should answer once (if possible) and close.
//   Unknown ops are NOT a decoder error: the server answers them with Status::UnknownOp.
// - Status: 0 ok, negative errno-style codes; status_str() names them.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer::proto {

inline constexpr uint32_t kMagic = 0x5043494e; // "NICP" as bytes 4E 49 43 50
inline constexpr uint16_t kVersion = 1;
inline constexpr size_t kHeaderBytes = 32;
inline constexpr uint32_t kMaxPayloadBytes = 1u << 20;

// Append-only: a new op takes the next number; a retired op keeps its number forever.
enum class Op : uint16_t {
    Status = 1,
    Metrics = 2,
    MetricsWatch = 3,
    SlotList = 4,
    SlotSave = 5,
    SlotRestore = 6,
    SlotErase = 7,
    CacheList = 8,
    CacheEvict = 9,
    ArtifactUpgrade = 10,
    Drain = 11,
    Resume = 12,
    LogLevel = 13,
    Reload = 14,
    Settings = 15, // since 2026-12: the daemon's effective settings (SettingsReply)
};
inline constexpr uint16_t kOpCount = 16; // one past the highest op number
std::string_view op_name(uint16_t op);   // "status", "slot-save", ... or "unknown"
bool op_is_admin(Op op);                 // changes state: needs admin rights

enum FrameFlags : uint16_t {
    kFlagReply = 1,  // sent by the daemon
    kFlagMore = 2,   // a streamed reply: more frames follow
    kFlagEnd = 4,    // the last frame of a streamed reply (payload may be empty)
    kFlagsKnown = 7, // any other bit set is a protocol error
};

enum class Status : int32_t {
    Ok = 0,
    Refused = -1,        // EPERM: the peer lacks admin rights
    NotFound = -2,       // ENOENT: no such slot file, cache key, ...
    Io = -5,             // EIO: disk error
    Busy = -16,          // EBUSY: e.g. draining, or the lane is in use
    Invalid = -22,       // EINVAL: bad argument (name, slot id, level)
    NoSpace = -28,       // ENOSPC: the plan or disk has no room
    BadMessage = -74,    // EBADMSG: malformed payload
    UnknownOp = -95,     // EOPNOTSUPP: op unknown to this daemon
    BadVersion = -71,    // EPROTO: protocol version not supported
    Timeout = -110,      // ETIMEDOUT
    Internal = -1000,    // unexpected failure inside the daemon (logged)
};
std::string_view status_str(Status s);

struct FrameHeader {
    uint16_t version = kVersion;
    uint16_t op = 0;
    uint16_t flags = 0;
    int32_t status = 0;
    uint64_t request_id = 0;
    uint32_t payload_bytes = 0;
};

struct Frame {
    FrameHeader header;
    std::vector<uint8_t> payload;
};

// Serialises a frame (header + payload). Payload larger than kMaxPayloadBytes is a caller bug:
// returns an empty vector.
std::vector<uint8_t> encode_frame(const FrameHeader& header, std::span<const uint8_t> payload);

class FrameDecoder {
  public:
    // Feeds bytes; complete frames become available through next().
    void feed(std::span<const uint8_t> bytes);
    // The next complete frame, if any. After an error returns nothing.
    std::optional<Frame> next();
    bool has_error() const { return !error_.empty(); }
    const std::string& error() const { return error_; } // one line, e.g. "bad magic 0x..."
    // Version announced by a frame refused for its version (to answer BadVersion with it).
    uint16_t refused_version() const { return refused_version_; }
    size_t buffered_bytes() const { return buf_.size() - pos_; }

  private:
    bool check_header(const uint8_t* h);
    std::vector<uint8_t> buf_;
    size_t pos_ = 0;
    std::string error_;
    uint16_t refused_version_ = 0;
};

} // namespace ninfer::proto
