// ninfer::core - `ninferctl artifact upgrade`: a v1 or v2 `.ninfer` container becomes V3 without new
// downloads (docs/ARTIFACT_FORMAT.md §5.2, §5.3).
//
// Contract:
// - artifact_upgrade(src, dst, options) reads SRC's framing and directory (v1: {model_id, objects};
//   v2: {identity {model_id, weights_id = "groupwise-int"}, objects}), checks every object
//   (closed member sets, known legacy format/layout names, 256-aligned tensors, bytes == encoded
//   size, ordered, inside the payload) and that the objects are exactly the published inventory
//   of the model (upgrade_inventory.h: names, shapes, formats, order). Then it writes a V3 entry
//   file: header, directory (components §4.4, objects with v3 names and the same logical offsets,
//   bindings and uses §4.3, metadata with every object's CRC-32C computed during the copy
//   (checksums.h), provenance, files) padded with spaces, and SRC's payload
//   bytes verbatim at the same logical offsets. Payload is copied extent by extent (SEEK_DATA /
//   SEEK_HOLE), so holes stay holes: a sparse test input gives a sparse output.
// - dst "" = in place: the V3 file is written beside SRC (temp in the same directory) and renamed
//   over SRC only once complete and fsynced; a crash leaves SRC intact. A different dst must not
//   exist. Sets larger than the 32e9-byte file limit get part files (`<dst>.part-0001`, ...),
//   published before the entry.
// - progress(done_bytes, total_bytes) is called as payload is copied. Errors throw
//   ninfer::Error("artifact upgrade: <path>: reason"); nothing is left under the final names.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace ninfer::core {

struct ArtifactUpgradeOptions {
    std::function<void(uint64_t done_bytes, uint64_t total_bytes)> progress;
    uint64_t file_size_limit = 32'000'000'000ull;
};

struct ArtifactUpgradeResult {
    int from_version = 0;
    std::string model_id;
    std::string destination;
    size_t n_objects = 0, n_bindings = 0, n_uses = 0;
    uint64_t payload_bytes = 0;     // logical payload of the V3 set
    uint64_t copied_bytes = 0;      // data extents actually copied
    size_t n_files = 1;
};

ArtifactUpgradeResult artifact_upgrade(const std::string& src, const std::string& dst,
                                       const ArtifactUpgradeOptions& options = {});

} // namespace ninfer::core
