// ninfer::core - safetensors reader: mmap, header validation, row reads converted to f32.
#include "core/convert/safetensors.h"

#include "core/formats/codec.h"
#include "core/util/error.h"
#include "core/util/regular_file.h"

#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <sys/mman.h>
#include <unistd.h>

namespace ninfer::core {
namespace {

namespace fs = std::filesystem;

// Headers of real checkpoints are well under 1 MiB; anything near this is a corrupt length.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

[[noreturn]] void fail(const std::string& file, const std::string& why) {
    throw Error("safetensors: " + file + ": " + why);
}

SourceDtype dtype_from_name(std::string_view s) {
    if (s == "BF16")
        return SourceDtype::Bf16;
    if (s == "F16")
        return SourceDtype::F16;
    if (s == "F32")
        return SourceDtype::F32;
    return SourceDtype::Unsupported;
}

// Element size of every dtype the format defines, so byte counts of unsupported tensors are
// still checked; 0 = unknown name.
uint64_t any_dtype_bytes(std::string_view s) {
    static const std::pair<std::string_view, uint64_t> sizes[] = {
        {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"I16", 2}, {"U16", 2},
        {"F16", 2},  {"BF16", 2}, {"I32", 4}, {"U32", 4},     {"F32", 4},     {"I64", 8}, {"U64", 8},
        {"F64", 8}};
    for (auto& [name, bytes] : sizes)
        if (name == s)
            return bytes;
    return 0;
}

std::string read_small_file(const std::string& path) {
    return read_regular_file(path, "safetensors");
}

} // namespace

uint64_t source_dtype_bytes(SourceDtype dtype) {
    switch (dtype) {
    case SourceDtype::Bf16:
    case SourceDtype::F16: return 2;
    case SourceDtype::F32: return 4;
    default: return 0;
    }
}

void SafetensorsCheckpoint::add_file(const std::string& path) {
    MappedFile file = MappedFile::open(path, "safetensors");
    if (file.size() < 8)
        fail(path, "truncated: " + std::to_string(file.size()) + " bytes, the header length alone is 8");
    const uint8_t* base = file.data();
    const uint64_t size = file.size();
    size_t index = files_.size();
    files_.push_back(std::move(file));

    uint64_t header_bytes = 0;
    std::memcpy(&header_bytes, base, 8);
    if (header_bytes == 0 || header_bytes > size - 8 || header_bytes > kMaxHeaderBytes)
        fail(path, "header length " + std::to_string(header_bytes) + " does not fit the file of " +
                       std::to_string(size) + " bytes");
    const uint64_t data_start = 8 + header_bytes, data_bytes = size - data_start;

    simdjson::dom::parser parser;
    simdjson::padded_string header(reinterpret_cast<const char*>(base + 8), header_bytes);
    simdjson::dom::object root;
    if (parser.parse(header).get_object().get(root) != simdjson::SUCCESS)
        fail(path, "the header is not a JSON object");
    for (auto [key, value] : root) {
        if (key == "__metadata__")
            continue;
        std::string name(key);
        simdjson::dom::object entry;
        std::string_view dtype;
        simdjson::dom::array shape, offsets;
        if (value.get_object().get(entry) != simdjson::SUCCESS ||
            entry["dtype"].get_string().get(dtype) != simdjson::SUCCESS ||
            entry["shape"].get_array().get(shape) != simdjson::SUCCESS ||
            entry["data_offsets"].get_array().get(offsets) != simdjson::SUCCESS)
            fail(path, "tensor " + name + " needs dtype, shape and data_offsets");
        SafetensorsTensor t;
        t.name = name;
        t.dtype_name = std::string(dtype);
        t.dtype = dtype_from_name(dtype);
        t.file_index = index;
        uint64_t elems = 1;
        for (auto d : shape) {
            uint64_t u;
            if (d.get_uint64().get(u) != simdjson::SUCCESS || __builtin_mul_overflow(elems, u, &elems))
                fail(path, "tensor " + name + " has an invalid shape");
            t.shape.push_back(u);
        }
        uint64_t off[2] = {0, 0};
        size_t n_off = 0;
        for (auto d : offsets) {
            if (n_off == 2 || d.get_uint64().get(off[n_off]) != simdjson::SUCCESS)
                fail(path, "tensor " + name + " has invalid data_offsets");
            ++n_off;
        }
        if (n_off != 2 || off[0] > off[1] || off[1] > data_bytes)
            fail(path, "tensor " + name + " data_offsets [" + std::to_string(off[0]) + "," +
                           std::to_string(off[1]) + "] lie outside the data area of " +
                           std::to_string(data_bytes) + " bytes");
        uint64_t word = any_dtype_bytes(dtype);
        if (word == 0)
            fail(path, "tensor " + name + " has unknown dtype " + t.dtype_name);
        uint64_t want;
        if (__builtin_mul_overflow(elems, word, &want) || want != off[1] - off[0])
            fail(path, "tensor " + name + " stores " + std::to_string(off[1] - off[0]) +
                           " bytes; its shape and dtype need " + std::to_string(elems * word));
        t.data = base + data_start + off[0];
        t.bytes = off[1] - off[0];
        if (tensors_.count(name))
            fail(path, "tensor " + name + " also appears in " +
                           files_[tensors_.at(name).file_index].path());
        tensors_.emplace(name, std::move(t));
    }
}

std::unique_ptr<SafetensorsCheckpoint> SafetensorsCheckpoint::open_files(const std::vector<std::string>& files) {
    std::unique_ptr<SafetensorsCheckpoint> c(new SafetensorsCheckpoint());
    for (const std::string& f : files)
        c->add_file(f);
    return c;
}

std::unique_ptr<SafetensorsCheckpoint> SafetensorsCheckpoint::open_dir(const std::string& dir) {
    fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
    if (!fs::exists(index_path)) {
        std::vector<std::string> files;
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(dir, ec))
            if (e.path().extension() == ".safetensors")
                files.push_back(e.path().string());
        if (ec)
            throw Error("safetensors: cannot list " + dir + ": " + ec.message());
        if (files.size() != 1)
            throw Error("safetensors: " + dir + " has " + std::to_string(files.size()) +
                        " .safetensors files and no model.safetensors.index.json");
        return open_files(files);
    }
    std::string text = read_small_file(index_path.string());
    simdjson::dom::parser parser;
    simdjson::dom::object map;
    if (parser.parse(text).get_object().get(map) != simdjson::SUCCESS ||
        map["weight_map"].get_object().get(map) != simdjson::SUCCESS)
        throw Error("safetensors: " + index_path.string() + ": no weight_map object");
    std::vector<std::pair<std::string, std::string>> expected; // tensor -> shard file name
    std::vector<std::string> shards;
    for (auto [key, value] : map) {
        std::string_view file;
        if (value.get_string().get(file) != simdjson::SUCCESS || file.find('/') != std::string_view::npos)
            throw Error("safetensors: " + index_path.string() + ": tensor " + std::string(key) +
                        " maps to an invalid shard name");
        expected.emplace_back(std::string(key), std::string(file));
        if (std::find(shards.begin(), shards.end(), file) == shards.end())
            shards.emplace_back(file);
    }
    std::vector<std::string> paths;
    for (const std::string& s : shards)
        paths.push_back((fs::path(dir) / s).string());
    auto c = open_files(paths);
    for (auto& [name, file] : expected) {
        const SafetensorsTensor* t = c->find(name);
        if (!t || fs::path(c->files_[t->file_index].path()).filename() != file)
            throw Error("safetensors: " + index_path.string() + ": tensor " + name +
                        " is not in shard " + file);
    }
    return c;
}

const SafetensorsTensor* SafetensorsCheckpoint::find(std::string_view name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
}

void SafetensorsCheckpoint::read_rows_f32(const SafetensorsTensor& t, uint64_t cols, uint64_t row_begin,
                                          uint64_t n_rows, float* out) const {
    const uint64_t word = source_dtype_bytes(t.dtype);
    if (word == 0)
        throw Error("safetensors: tensor " + t.name + " has dtype " + t.dtype_name +
                    "; the converter reads BF16, F16 and F32");
    const uint64_t elems = t.bytes / word;
    if (cols == 0 || elems % cols != 0 || (row_begin + n_rows) * cols > elems)
        throw Error("safetensors: rows [" + std::to_string(row_begin) + "," +
                    std::to_string(row_begin + n_rows) + ") x " + std::to_string(cols) +
                    " exceed tensor " + t.name);
    const uint64_t n = n_rows * cols;
    const uint8_t* src = t.data + row_begin * cols * word;
    switch (t.dtype) {
    case SourceDtype::Bf16:
        for (uint64_t i = 0; i < n; ++i) {
            uint32_t bits = uint32_t(uint16_t(src[2 * i] | (src[2 * i + 1] << 8))) << 16;
            std::memcpy(&out[i], &bits, 4);
        }
        break;
    case SourceDtype::F16:
        for (uint64_t i = 0; i < n; ++i)
            out[i] = f16_to_f32(uint16_t(src[2 * i] | (src[2 * i + 1] << 8)));
        break;
    default: std::memcpy(out, src, n * 4); break;
    }
}

void SafetensorsCheckpoint::release(const SafetensorsTensor& t) const { release_bytes(t, 0, t.bytes); }

void SafetensorsCheckpoint::release_bytes(const SafetensorsTensor& t, uint64_t byte_begin, uint64_t byte_end) const {
    // Only whole pages inside the range are dropped; a page shared with a neighbour stays.
    const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
    uintptr_t begin = reinterpret_cast<uintptr_t>(t.data + byte_begin);
    uintptr_t end = reinterpret_cast<uintptr_t>(t.data + std::min(byte_end, t.bytes));
    begin = (begin + page - 1) & ~(page - 1);
    end &= ~(page - 1);
    if (end > begin)
        madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

} // namespace ninfer::core
