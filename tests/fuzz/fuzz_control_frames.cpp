// ninfer fuzz - the control protocol (proto/frame.h, proto/messages.h): the input is a byte
// stream fed to a FrameDecoder in chunks of 1 + data[0] bytes (any split must decode alike);
// every frame that comes out has its payload decoded as every message type. Decoders return
// nullopt on bad input; any crash, over-read or a frame whose payload length differs from its
// header is a bug.
// NINFER_FUZZ_WRITE_SEEDS=DIR writes the seed streams (tests/fuzz/corpus/control_frames/) and exits.
#include "proto/frame.h"
#include "proto/messages.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>

using namespace ninfer::proto;

namespace {
template <typename... T> void decode_as(std::span<const uint8_t> payload) { ((void)decode_payload<T>(payload), ...); }

template <typename T> std::vector<uint8_t> frame_of(Op op, uint16_t flags, const T& payload) {
    FrameHeader h;
    h.op = uint16_t(op);
    h.flags = flags;
    h.request_id = 7;
    return encode_frame(h, encode_payload(payload));
}

void write_seeds(const std::string& dir) {
    StatusReply status;
    status.lanes = {{0, "idle", 1}, {1, "decode", 2}};
    std::vector<std::vector<uint8_t>> streams = {
        frame_of(Op::Status, 0, EmptyPayload{}),
        frame_of(Op::SlotSave, 0, SlotRequest{2, "name"}),
        frame_of(Op::CacheEvict, 0, CacheEvictRequest{CacheEvictMode::All, "k", 5}),
        frame_of(Op::ArtifactUpgrade, 0, ArtifactUpgradeRequest{"/a.ninfer", "/b.ninfer"}),
        frame_of(Op::LogLevel, 0, LogLevelRequest{"debug"}),
        frame_of(Op::MetricsWatch, 0, MetricsWatchRequest{100, 3}),
        frame_of(Op::Status, kFlagReply, status),
        frame_of(Op::Settings, kFlagReply, SettingsReply{{{"port", "1", true, false}}}),
        frame_of(Op::ArtifactUpgrade, kFlagReply | kFlagMore, ProgressReply{1, 2, "m"}),
        frame_of(Op::SlotSave, kFlagReply, ErrorReply{"slot is busy"}),
    };
    for (size_t i = 0; i < streams.size(); ++i) {
        std::ofstream out(dir + "/seed" + std::to_string(i), std::ios::binary);
        char chunk = char(i * 7); // the split size byte
        out.write(&chunk, 1);
        out.write(reinterpret_cast<const char*>(streams[i].data()), std::streamsize(streams[i].size()));
    }
}
} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    if (const char* dir = std::getenv("NINFER_FUZZ_WRITE_SEEDS")) {
        write_seeds(dir);
        std::exit(0);
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    size_t chunk = 1 + size_t(data[0]);
    FrameDecoder decoder;
    for (size_t off = 1; off < size && !decoder.has_error(); off += chunk) {
        decoder.feed({data + off, std::min(chunk, size - off)});
        while (std::optional<Frame> frame = decoder.next()) {
            if (frame->payload.size() != frame->header.payload_bytes) {
                std::fprintf(stderr, "fuzz: frame payload %zu bytes, header says %u\n", frame->payload.size(),
                             frame->header.payload_bytes);
                std::abort();
            }
            (void)op_name(frame->header.op);
            decode_as<EmptyPayload, StatusReply, MetricsReply, MetricsWatchRequest, SlotRequest, SlotReply,
                      SlotListReply, CacheListReply, CacheEvictRequest, CountReply, ArtifactUpgradeRequest,
                      ProgressReply, ArtifactUpgradeReply, LogLevelRequest, SettingsReply, ErrorReply>(frame->payload);
        }
    }
    return 0;
}
