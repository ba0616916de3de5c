// ninfer::core - read-only mmap of a file with RAII unmapping.
#include "core/util/mapped_file.h"

#include "core/util/error.h"
#include "core/util/regular_file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace ninfer::core {

MappedFile MappedFile::open(const std::string& path, std::string_view what) {
    const std::string prefix = std::string(what) + ": " + path + ": ";
    struct stat st {};
    FileDescriptor fd = open_regular_file(path, what, &st); // never blocks on a FIFO
    MappedFile m;
    m.path_ = path;
    m.size_ = uint64_t(st.st_size);
    if (m.size_ > 0) {
        void* p = ::mmap(nullptr, m.size_, PROT_READ, MAP_PRIVATE, fd.get(), 0);
        if (p == MAP_FAILED) throw Error(prefix + "mmap failed: " + std::strerror(errno));
        m.data_ = static_cast<const uint8_t*>(p);
    }
    return m;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)),
      path_(std::move(other.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
    if (this != &other) {
        release();
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        path_ = std::move(other.path_);
    }
    return *this;
}

MappedFile::~MappedFile() { release(); }

void MappedFile::release() noexcept {
    if (data_)
        ::munmap(const_cast<uint8_t*>(data_), size_);
    data_ = nullptr;
    size_ = 0;
}

void MappedFile::advise_willneed(uint64_t offset, uint64_t length) const {
    if (!data_ || offset >= size_)
        return;
    const uint64_t page = uint64_t(::sysconf(_SC_PAGESIZE));
    const uint64_t start = offset / page * page;
    const uint64_t end = std::min(size_, offset + length);
    ::madvise(const_cast<uint8_t*>(data_) + start, end - start, MADV_WILLNEED);
}

} // namespace ninfer::core
