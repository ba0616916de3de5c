// ninfer tests - helpers for artifact tests: scratch directories and small artifacts.
#pragma once

#include "core/artifact/writer.h"
#include "core/formats/codec.h"
#include "core/formats/format.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace ninfer::test {

// A fresh directory under /tmp, removed with its contents on destruction.
struct ScratchDir {
    std::filesystem::path path;
    ScratchDir() {
        std::string tmpl = (std::filesystem::temp_directory_path() / "ninfer-art-XXXXXX").string();
        path = ::mkdtemp(tmpl.data());
    }
    ~ScratchDir() { std::filesystem::remove_all(path); }
    std::string file(const std::string& name) const { return (path / name).string(); }
    std::vector<std::string> entries() const {
        std::vector<std::string> names;
        for (const auto& e : std::filesystem::directory_iterator(path))
            names.push_back(e.path().filename().string());
        std::sort(names.begin(), names.end());
        return names;
    }
};

inline std::vector<uint8_t> read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

inline std::span<const uint8_t> as_bytes(const std::string& s) {
    return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// A minimal valid artifact: one bf16 [2,2] tensor bound as "p", a tokenizer resource.
inline void write_minimal(const std::string& path, core::ArtifactWriterOptions opt = {}) {
    core::ArtifactWriter w(path, opt);
    std::vector<float> v = {1.0f, -2.0f, 0.5f, 3.0f};
    std::vector<uint64_t> shape = {2, 2};
    w.add_tensor("weight/000000", core::TensorFormat::Bf16, shape, core::encode(core::TensorFormat::Bf16, shape, v));
    w.add_resource("resource/text/tokenizer.json", as_bytes("{}"));
    w.add_component("text", R"({"hidden_size":2})", {}, {{"tokenizer.json", "resource/text/tokenizer.json"}});
    w.bind("p", "weight/000000");
    w.set_metadata_json(R"({"name":"tiny"})");
    w.finish();
}

} // namespace ninfer::test
