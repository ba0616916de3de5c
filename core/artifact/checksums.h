// ninfer::core - per-object payload checksums of a `.ninfer` artifact: written into the open
// `metadata` object, verified on request (ninferctl inspect --verify, ninferd --verify-artifact).
//
// Contract:
// - Where: metadata.payload_crc32c = {"<object id>": "<8 lowercase hex digits>", ...}, one member
//   per object (tensor or resource) in directory order: the CRC-32C (core/util/crc32c.h) of the
//   object's `bytes` payload bytes. metadata is an open member of the v3 root
//   (docs/ARTIFACT_FORMAT.md §1.3), so readers that do not know it (upstream's) are unaffected. Not in the spec upstream: ours
//   (docs/ARTIFACT_FORMAT.md §4, §7).
// - Why CRC-32C and not SHA-256: it detects storage and copy corruption (every burst up to 32
//   bits, any other error with probability 1 - 2^-32), runs at memory speed with the SSE4.2
//   instruction and splits into chunks checked on several threads and combined, so a load-time
//   check is cheap. It is no defence against a forger (who rewrites the CRC too); a published
//   SHA-256 of the files is (docs/ARTIFACT_FORMAT.md §5.1).
// - metadata_with_payload_crc32c(metadata_json, crcs) returns the metadata object text with the
//   member added (metadata_json must be an object without it; the writer refuses one that has it).
// - PayloadCrcs computes the member's values from a payload streamed in increasing logical
//   offsets (the upgrade's copy): construct it with the objects sorted by offset, non-overlapping;
//   feed(offset, data, n) one read at a time (offset >= the end of the previous feed; bytes skipped
//   between feeds, such as sparse holes, count as zeros); crcs(total) ends the stream at `total`
//   and returns (id, crc) in object order for metadata_with_payload_crc32c.
// - metadata_without_payload_crc32c(metadata_json): the metadata text minus that member (for
//   displays; the member is long), members otherwise as they were (minified).
// - verify_payload_checksums(artifact, n_threads) recomputes every object's CRC (objects split
//   into 64 MiB chunks over n_threads threads) and compares. It throws ninfer::Error
//   ("artifact: PATH: payload checksum mismatch: tensor ID (bound as PARAM): stored X, computed
//   Y" plus how many others differ) on a mismatch, on a malformed payload_crc32c member, on a
//   checksum for an object that does not exist or on an object with none. Without the member it
//   returns has_checksums = false and checks nothing: the caller says what that means.
// Thread safety: pure over a const Artifact (whose views any thread may read).
#pragma once

#include "core/artifact/artifact.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ninfer::core {

inline constexpr const char* kPayloadCrc32cMember = "payload_crc32c";

std::string metadata_with_payload_crc32c(std::string_view metadata_json,
                                         const std::vector<std::pair<std::string_view, uint32_t>>& crcs);

std::string metadata_without_payload_crc32c(std::string_view metadata_json);

class PayloadCrcs {
  public:
    struct Object {
        std::string_view id; // must outlive the PayloadCrcs
        uint64_t offset = 0, bytes = 0;
    };
    explicit PayloadCrcs(std::vector<Object> objects);
    void feed(uint64_t offset, const uint8_t* data, uint64_t n);
    std::vector<std::pair<std::string_view, uint32_t>> crcs(uint64_t total);

  private:
    void extend(uint64_t offset, const uint8_t* data, uint64_t n); // data null: zeros
    std::vector<Object> objects_;
    std::vector<uint32_t> crc_;
    size_t next_ = 0;     // first object not complete
    uint64_t fed_to_ = 0; // logical offset fed so far
};

struct PayloadVerifyResult {
    bool has_checksums = false;
    uint64_t n_objects = 0; // checked
    uint64_t n_bytes = 0;   // checked
    double seconds = 0;     // wall time of the check
};

PayloadVerifyResult verify_payload_checksums(const Artifact& artifact, unsigned n_threads);

} // namespace ninfer::core
