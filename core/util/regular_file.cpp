// ninfer::core - non-blocking open + fstat check for every file read by name.
#include "core/util/regular_file.h"

#include "core/util/error.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ninfer::core {

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& other) noexcept {
    if (this != &other) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = other.release();
    }
    return *this;
}

FileDescriptor::~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
}

int FileDescriptor::release() noexcept {
    int fd = fd_;
    fd_ = -1;
    return fd;
}

std::string_view file_type_name(unsigned mode) {
    switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFSOCK: return "a socket";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    default: return "not a file";
    }
}

FileDescriptor open_regular_file(const std::string& path, std::string_view what, struct stat* st_out) {
    std::string prefix = std::string(what) + ": " + path + ": ";
    FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
    if (fd.get() < 0) throw Error(errc_of_errno(errno), prefix + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) throw Error(errc_of_errno(errno), prefix + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) throw Error(prefix + "not a regular file (" + std::string(file_type_name(st.st_mode)) + ")");
    int flags = ::fcntl(fd.get(), F_GETFL);
    if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0)
        throw Error(errc_of_errno(errno), prefix + std::strerror(errno));
    if (st_out) *st_out = st;
    return fd;
}

namespace {

std::string read_all(int fd, const std::string& prefix, size_t max_bytes) {
    std::string text;
    char buf[65536];
    for (;;) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw Error(errc_of_errno(errno), prefix + std::strerror(errno));
        if (n == 0) break;
        if (text.size() + size_t(n) > max_bytes) throw Error(prefix + "larger than " + std::to_string(max_bytes) + " bytes");
        text.append(buf, size_t(n));
    }
    return text;
}

} // namespace

std::string read_regular_file(const std::string& path, std::string_view what, size_t max_bytes) {
    struct stat st {};
    FileDescriptor fd = open_regular_file(path, what, &st);
    std::string prefix = std::string(what) + ": " + path + ": ";
    if (uint64_t(st.st_size) > max_bytes) throw Error(prefix + "larger than " + std::to_string(max_bytes) + " bytes");
    return read_all(fd.get(), prefix, max_bytes);
}

std::string read_input_file(const std::string& path, std::string_view what) {
    std::string prefix = std::string(what) + ": " + (path == "-" ? "stdin" : path) + ": ";
    FileDescriptor owned;
    int fd = STDIN_FILENO;
    if (path != "-") {
        owned = FileDescriptor(::open(path.c_str(), O_RDONLY | O_NOCTTY | O_CLOEXEC));
        if (owned.get() < 0) throw Error(errc_of_errno(errno), prefix + std::strerror(errno));
        fd = owned.get();
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) throw Error(errc_of_errno(errno), prefix + std::strerror(errno));
    if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode))
        throw Error(prefix + "not a file or pipe (" + std::string(file_type_name(st.st_mode)) + ")");
    return read_all(fd, prefix, SIZE_MAX);
}

} // namespace ninfer::core
