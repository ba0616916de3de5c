// ninfer::core - read Hugging Face safetensors checkpoints (one file, or shards plus
// model.safetensors.index.json) through mmap.
//
// Contract:
// - SafetensorsCheckpoint::open_dir(dir) opens `model.safetensors.index.json` when present (every
//   shard it names, every tensor checked to live in the shard the index says), else the single
//   `*.safetensors` file in dir. open_files opens the given files as one checkpoint.
// - Every header is validated before use: 8-byte length within the file, a JSON object, each
//   entry with dtype, shape and data_offsets, offsets inside the data area, byte count equal to
//   the shape's element count times the dtype size, no name in two files. Errors are
//   ninfer::Error("safetensors: <file>: <reason>").
// - Tensors of dtypes other than BF16, F16 and F32 may be listed; reading one throws.
// - read_rows_f32 converts rows [row_begin, row_begin+n_rows) of a tensor viewed as [numel/cols,
//   cols] to f32. release() drops the tensor's pages from this process (madvise DONTNEED) so a
//   converter that walks tensor by tensor keeps its resident memory bounded.
// Thread safety: reads are const and may run concurrently; open/close are single-threaded.
#pragma once

#include "core/util/mapped_file.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer::core {

enum class SourceDtype : uint8_t { Bf16, F16, F32, Unsupported };

struct SafetensorsTensor {
    std::string name;
    std::string dtype_name; // as written in the header, e.g. "BF16"
    SourceDtype dtype = SourceDtype::Unsupported;
    std::vector<uint64_t> shape;
    const uint8_t* data = nullptr;
    uint64_t bytes = 0;
    size_t file_index = 0;
};

class SafetensorsCheckpoint {
  public:
    static std::unique_ptr<SafetensorsCheckpoint> open_dir(const std::string& dir);
    static std::unique_ptr<SafetensorsCheckpoint> open_files(const std::vector<std::string>& files);
    SafetensorsCheckpoint(const SafetensorsCheckpoint&) = delete;
    SafetensorsCheckpoint& operator=(const SafetensorsCheckpoint&) = delete;

    const SafetensorsTensor* find(std::string_view name) const; // nullptr if absent
    const std::map<std::string, SafetensorsTensor, std::less<>>& tensors() const { return tensors_; }
    size_t n_files() const { return files_.size(); }

    void read_rows_f32(const SafetensorsTensor& t, uint64_t cols, uint64_t row_begin,
                       uint64_t n_rows, float* out) const;
    void release(const SafetensorsTensor& t) const;
    void release_bytes(const SafetensorsTensor& t, uint64_t byte_begin, uint64_t byte_end) const;

  private:
    SafetensorsCheckpoint() = default;
    void add_file(const std::string& path);

    std::vector<MappedFile> files_;
    std::map<std::string, SafetensorsTensor, std::less<>> tensors_;
};

uint64_t source_dtype_bytes(SourceDtype dtype);

} // namespace ninfer::core
