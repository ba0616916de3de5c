// ninfer::proto - frame encoding, the incremental decoder, op and status names.
#include "proto/frame.h"

#include "proto/wire.h"

#include <cstdio>
#include <cstring>

namespace ninfer::proto {

namespace {
struct OpInfo {
    const char* name;
    bool admin;
};
// Indexed by op number; index 0 is unused.
constexpr OpInfo kOps[kOpCount] = {
    {"unknown", false},     {"status", false},    {"metrics", false},      {"metrics-watch", false},
    {"slot-list", false},   {"slot-save", true},  {"slot-restore", true},  {"slot-erase", true},
    {"cache-list", false},  {"cache-evict", true}, {"artifact-upgrade", true}, {"drain", true},
    {"resume", true},       {"log-level", true},  {"reload", true},          {"settings", false},
};
} // namespace

std::string_view op_name(uint16_t op) { return op < kOpCount ? kOps[op].name : "unknown"; }

bool op_is_admin(Op op) {
    uint16_t n = uint16_t(op);
    return n >= kOpCount || kOps[n].admin; // unknown ops are treated as admin
}

std::string_view status_str(Status s) {
    switch (s) {
    case Status::Ok: return "ok";
    case Status::Refused: return "operation not permitted (admin rights needed)";
    case Status::NotFound: return "not found";
    case Status::Io: return "input/output error";
    case Status::Busy: return "busy";
    case Status::Invalid: return "invalid argument";
    case Status::NoSpace: return "no space";
    case Status::BadMessage: return "malformed message";
    case Status::UnknownOp: return "operation not supported by this daemon";
    case Status::BadVersion: return "protocol version not supported";
    case Status::Timeout: return "timed out";
    case Status::Internal: return "internal error";
    }
    return "unknown status";
}

std::vector<uint8_t> encode_frame(const FrameHeader& header, std::span<const uint8_t> payload) {
    if (payload.size() > kMaxPayloadBytes)
        return {};
    WireWriter w;
    w.u32(kMagic);
    w.u16(header.version);
    w.u16(header.op);
    w.u16(header.flags);
    w.u16(0);
    w.i32(header.status);
    w.u64(header.request_id);
    w.u32(uint32_t(payload.size()));
    w.u32(0);
    std::vector<uint8_t>& out = w.bytes();
    out.insert(out.end(), payload.begin(), payload.end());
    return std::move(out);
}

void FrameDecoder::feed(std::span<const uint8_t> bytes) {
    if (has_error())
        return;
    // Compact consumed bytes before growing, so a long-lived connection does not grow forever.
    if (pos_ > 0 && pos_ == buf_.size()) {
        buf_.clear();
        pos_ = 0;
    } else if (pos_ > (1u << 16)) {
        buf_.erase(buf_.begin(), buf_.begin() + long(pos_));
        pos_ = 0;
    }
    buf_.insert(buf_.end(), bytes.begin(), bytes.end());
}

bool FrameDecoder::check_header(const uint8_t* h) {
    WireReader r({h, kHeaderBytes});
    uint32_t magic = r.u32();
    uint16_t version = r.u16();
    r.u16(); // op: any value; unknown ops are answered, not refused here
    uint16_t flags = r.u16();
    uint16_t reserved1 = r.u16();
    r.i32();
    r.u64();
    uint32_t payload = r.u32();
    uint32_t reserved2 = r.u32();
    char msg[96];
    if (magic != kMagic) {
        std::snprintf(msg, sizeof msg, "bad magic 0x%08x (not a ninfer control frame)", magic);
        error_ = msg;
    } else if (version != kVersion) {
        refused_version_ = version;
        std::snprintf(msg, sizeof msg, "protocol version %u not supported (this side speaks %u)",
                      version, kVersion);
        error_ = msg;
    } else if (reserved1 != 0 || reserved2 != 0) {
        error_ = "reserved header field is not zero";
    } else if (flags & ~kFlagsKnown) {
        std::snprintf(msg, sizeof msg, "unknown frame flags 0x%04x", flags);
        error_ = msg;
    } else if (payload > kMaxPayloadBytes) {
        std::snprintf(msg, sizeof msg, "payload of %u bytes exceeds the %u-byte limit", payload,
                      kMaxPayloadBytes);
        error_ = msg;
    }
    return error_.empty();
}

std::optional<Frame> FrameDecoder::next() {
    if (has_error() || buffered_bytes() < kHeaderBytes)
        return std::nullopt;
    const uint8_t* h = buf_.data() + pos_;
    if (!check_header(h))
        return std::nullopt;
    WireReader r({h, kHeaderBytes});
    Frame f;
    r.u32();
    f.header.version = r.u16();
    f.header.op = r.u16();
    f.header.flags = r.u16();
    r.u16();
    f.header.status = r.i32();
    f.header.request_id = r.u64();
    f.header.payload_bytes = r.u32();
    if (buffered_bytes() < kHeaderBytes + f.header.payload_bytes)
        return std::nullopt;
    const uint8_t* p = h + kHeaderBytes;
    f.payload.assign(p, p + f.header.payload_bytes);
    pos_ += kHeaderBytes + f.header.payload_bytes;
    return f;
}

} // namespace ninfer::proto
