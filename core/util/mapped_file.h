// ninfer::core - a read-only memory mapping of a whole file.
//
// Contract:
// - MappedFile::open(path) opens (open_regular_file: a FIFO, directory or device is refused
//   without blocking) and mmaps the file read-only (MAP_PRIVATE); an empty file maps to
//   data() == nullptr, size() == 0. Failures throw ninfer::Error("<what>: <path>: <reason>")
//   with `what` naming the caller's subsystem (e.g. "artifact").
// - The mapping lives as long as the object (move-only); data() is valid until destruction.
// - advise_willneed(offset, length) is a hint (madvise) and never fails.
// Thread safety: immutable after open; any thread may read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ninfer::core {

class MappedFile {
  public:
    static MappedFile open(const std::string& path, std::string_view what = "file");
    MappedFile() = default;
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    ~MappedFile();

    const uint8_t* data() const { return data_; }
    uint64_t size() const { return size_; }
    const std::string& path() const { return path_; }
    void advise_willneed(uint64_t offset, uint64_t length) const;

  private:
    void release() noexcept;
    const uint8_t* data_ = nullptr;
    uint64_t size_ = 0;
    std::string path_;
};

} // namespace ninfer::core
