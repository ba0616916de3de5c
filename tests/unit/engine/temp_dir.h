// ninfer tests - a fresh directory under /tmp, removed with everything in it at scope exit.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace ninfer::test {

struct TempDir {
    std::string path;
    TempDir() {
        char buf[] = "/tmp/ninfer-engine-XXXXXX";
        path = ::mkdtemp(buf);
    }
    ~TempDir() { std::filesystem::remove_all(path); }
};

} // namespace ninfer::test
