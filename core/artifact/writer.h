// ninfer::core - write a `.ninfer` V3 artifact (docs/ARTIFACT_FORMAT.md §1.3, "Writer").
//
// Contract:
// - Tensors are added one at a time with their encoded bytes (the writer never holds the whole
//   model: payload goes to a temp file as it arrives, so memory stays bounded). Offsets are
//   assigned in order (tensors 256-aligned, resources 1-aligned).
// - Streaming: begin_tensor reserves the object's whole byte range (the layout fixes its size);
//   write(stream, offset, bytes) fills any part of it, in any order, so no caller ever holds a
//   whole encoded object; end_tensor checks that every byte was written exactly once (an overlap
//   is refused at the write that makes it). Several streams may be open; finish() refuses while
//   any is. add_tensor(id, ..., encoded) is begin + one write + end.
// - finish() writes the directory (JSON reserve loop, space padding), splits into part files when
//   over the size limit, fdatasyncs, and publishes by hard link: parts first, entry last. Until
//   finish() returns nothing exists under the final names. A target that exists is refused unless
//   `force` (then it is replaced only at publication). Any error or destruction before finish()
//   removes the temp files. Errors throw ninfer::Error("artifact writer: PATH: reason"); after
//   an error in finish() or a failed payload write, the writer refuses further calls.
// - Single-file sets get their payload in place: the header goes into the header_reserve room in
//   front of the streamed payload when the directory fits there (any filesystem), else it is
//   inserted with fallocate INSERT_RANGE where the filesystem supports it, else the payload is
//   copied once. A larger reserve only adds trailing spaces to the JSON (J = E - 32, §1.3).
// - Engine-side readers must be able to read what this writes; tests round-trip every format.
#pragma once

#include "core/formats/tensor.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace ninfer::core {

struct ArtifactWriterOptions {
    bool force = false;                            // replace an existing target
    uint64_t file_size_limit = 32'000'000'000ull;  // bytes per file, framing included
    // Expected entry header size E (rounded up to 4096; 0 = the smallest header). The payload is
    // streamed behind that much room and the JSON reserve loop starts there, so a directory that
    // fits is written in front of the payload without moving it (see the contract above).
    uint64_t header_reserve = 0;
};

class ArtifactWriter {
  public:
    ArtifactWriter(std::string path, ArtifactWriterOptions options);
    ~ArtifactWriter(); // removes temp files if finish() was not reached
    ArtifactWriter(const ArtifactWriter&) = delete;
    ArtifactWriter& operator=(const ArtifactWriter&) = delete;

    // Adds a resource object; returns its id (e.g. "resource/text/tokenizer.json").
    std::string add_resource(std::string id, std::span<const uint8_t> bytes);
    // Adds a tensor object with its encoded bytes (size checked against the layout); returns its id.
    std::string add_tensor(std::string id, TensorFormat format, std::vector<uint64_t> shape,
                           std::span<const uint8_t> encoded);
    // A tensor written in pieces (see the contract above).
    struct TensorStream {
        size_t object = SIZE_MAX; // index of the object, internal
    };
    TensorStream begin_tensor(std::string id, TensorFormat format, std::vector<uint64_t> shape);
    // Writes bytes at `offset` within the object's encoded bytes.
    void write(const TensorStream& stream, uint64_t offset, std::span<const uint8_t> bytes);
    // Closes the stream once every byte is written; returns the object id.
    std::string end_tensor(const TensorStream& stream);

    // Component `id` with its config JSON text, optional target, resources role -> object id,
    // optional proposal JSON.
    void add_component(std::string id, std::string config_json, std::string target = {},
                       std::vector<std::pair<std::string, std::string>> resources = {},
                       std::string proposal_json = {});
    // Binds a logical parameter to a whole tensor object, or to rows [row_begin, row_end) of a
    // rank-2 object (element range [row_begin*K, row_end*K)).
    void bind(std::string parameter, const std::string& object_id);
    void bind_rows(std::string parameter, const std::string& object_id, uint64_t row_begin,
                   uint64_t row_end);
    // General form: a parameter made of element ranges of one or more objects.
    struct PartRef {
        std::string object_id;
        uint64_t begin, end;
    };
    void bind_parts(std::string parameter, std::vector<PartRef> parts);

    // A Use record (§1.3): the weight `parameter` consumed by compute site `input`, with an
    // optional activation policy ("" = absent, "A16Only", "AllowA8", "AllowA4") and auxiliary
    // bindings by role (e.g. "activation_input_divisor" -> one FP32 element).
    struct Use {
        std::string parameter, input, activation_policy;
        std::vector<std::pair<std::string, std::vector<PartRef>>> auxiliaries;
    };
    void add_use(Use use);

    void set_metadata_json(std::string json);   // an object; must contain "name"
    void set_provenance_json(std::string json); // an object

    uint64_t payload_bytes() const; // logical payload written so far (for progress reports)

    // Writes the directory and publishes. Returns the total bytes written (all files).
    uint64_t finish();

    struct Impl;

  private:
    std::unique_ptr<Impl> impl_;
};

} // namespace ninfer::core
