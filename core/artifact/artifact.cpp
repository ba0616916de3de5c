// ninfer::core - .ninfer V3 reader: framing checks, parts, object views, bindings
// (docs/ARTIFACT_FORMAT.md §1.3, §6).
#include "core/artifact/artifact.h"

#include "core/artifact/directory.h"
#include "core/formats/codec.h"
#include "core/formats/format.h"
#include "core/util/error.h"
#include "core/util/mapped_file.h"

#include <cmath>
#include <cstring>

namespace ninfer::core {
namespace {

constexpr uint8_t kEntryMagic[8] = {'N', 'I', 'N', 'F', 'E', 'R', 0, 3};
constexpr uint8_t kPartMagic[8] = {'N', 'I', 'N', 'P', 'R', 'T', 0, 3};

uint64_t get_u64(const uint8_t* p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i)
        v = (v << 8) | p[i];
    return v;
}

std::string hex(const uint8_t* p, size_t n) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string s;
    for (size_t i = 0; i < n; ++i)
        s += kHex[p[i] >> 4], s += kHex[p[i] & 0xF];
    return s;
}

} // namespace

struct Artifact::Impl {
    std::string path, prefix;
    uint8_t artifact_id[16] = {};
    std::vector<MappedFile> files; // entry, then parts
    std::vector<uint64_t> file_payload_start, file_payload_begin, file_payload_bytes;
    std::vector<std::unique_ptr<uint8_t[]>> owned; // objects straddling files
    detail::Directory dir;
    std::map<std::string, ArtifactComponent> components;
    std::map<std::string, ArtifactResource> resources;
    std::vector<StoredTensor> tensors;
    std::map<std::string, WeightBinding> bindings;
    std::vector<ArtifactUse> uses;

    [[noreturn]] void fail(const std::string& msg) const { throw Error(prefix + msg); }

    void check_entry_framing();
    void open_parts();
    const uint8_t* locate(const std::string& id, uint64_t offset, uint64_t bytes);
    WeightBinding resolve(const std::string& name, const detail::DirBinding& b,
                          const std::vector<size_t>& tensor_of_object) const;
    void build();
};

void Artifact::Impl::check_entry_framing() {
    const MappedFile& f = files[0];
    const uint8_t* p = f.data();
    const uint64_t size = f.size();
    if (size < 8)
        fail("truncated: " + std::to_string(size) + " bytes, smaller than the 32-byte header");
    if (std::memcmp(p, "NINFER\0", 7) == 0 && (p[7] == 1 || p[7] == 2))
        fail("NInfer v" + std::to_string(p[7]) +
             " artifact is not supported; upgrade it with `ninferctl artifact upgrade " + path +
             " OUT.ninfer`");
    if (std::memcmp(p, kPartMagic, 8) == 0)
        fail("this is a continuation part file, not an entry; open the .ninfer entry file");
    if (std::memcmp(p, kEntryMagic, 8) != 0)
        fail("wrong magic (expected NInfer v3 entry magic 4E 49 4E 46 45 52 00 03)");
    if (size < 32)
        fail("truncated: " + std::to_string(size) + " bytes, smaller than the 32-byte header");
    const uint64_t json_bytes = get_u64(p + 8);
    if (json_bytes == 0)
        fail("json_bytes must be positive");
    if (json_bytes > size - 32)
        fail("truncated: directory declares " + std::to_string(json_bytes) + " JSON bytes but only " +
             std::to_string(size - 32) + " follow the header");
    std::memcpy(artifact_id, p + 16, 16);
    const uint64_t e = (32 + json_bytes + 4095) / 4096 * 4096; // cannot overflow: <= size + 4095
    const std::string entry_name = path.substr(path.find_last_of('/') + 1);
    dir = detail::parse_directory(
        std::string_view(reinterpret_cast<const char*>(p + 32), json_bytes), entry_name, prefix);
    const uint64_t b0 = dir.files[0].payload_bytes;
    if (b0 > UINT64_MAX - e || size != e + b0)
        fail((size < e + b0 ? "truncated: entry is " : "entry length ") + std::to_string(size) +
             " bytes; directory requires " + std::to_string(e) + " + " + std::to_string(b0));
    file_payload_start.push_back(e);
}

void Artifact::Impl::open_parts() {
    const size_t slash = path.find_last_of('/');
    const std::string dir_path = slash == std::string::npos ? "" : path.substr(0, slash + 1);
    for (size_t i = 1; i < dir.files.size(); ++i) {
        const std::string part_path = dir_path + dir.files[i].path;
        MappedFile f;
        try {
            f = MappedFile::open(part_path, "part");
        } catch (const Error& e) {
            fail(std::string("cannot open ") + e.what());
        }
        const std::string where = "part " + dir.files[i].path + ": ";
        if (f.size() < 32)
            fail(where + "truncated: " + std::to_string(f.size()) + " bytes");
        if (std::memcmp(f.data(), kPartMagic, 8) != 0)
            fail(where + "wrong magic (expected NInfer v3 continuation magic)");
        if (get_u64(f.data() + 8) != i || std::memcmp(f.data() + 16, artifact_id, 16) != 0)
            fail(where + "continuation header does not belong to this entry");
        if (f.size() != 4096 + dir.files[i].payload_bytes)
            fail(where + "continuation length " + std::to_string(f.size()) +
                 " differs from directory (" + std::to_string(4096 + dir.files[i].payload_bytes) + ")");
        files.push_back(std::move(f));
        file_payload_start.push_back(4096);
    }
    uint64_t at = 0;
    for (const detail::DirFile& df : dir.files) {
        file_payload_begin.push_back(at);
        file_payload_bytes.push_back(df.payload_bytes);
        at += df.payload_bytes;
    }
}

// The object's bytes: a view into one mapped file, or a copy if it straddles files.
const uint8_t* Artifact::Impl::locate(const std::string& id, uint64_t offset, uint64_t bytes) {
    for (size_t i = 0; i < files.size(); ++i) {
        const uint64_t a = file_payload_begin[i], b = a + file_payload_bytes[i];
        if (offset >= a && offset < b && offset + bytes <= b)
            return files[i].data() + file_payload_start[i] + (offset - a);
    }
    auto buf = std::make_unique<uint8_t[]>(bytes);
    for (size_t i = 0; i < files.size(); ++i) {
        const uint64_t a = std::max(offset, file_payload_begin[i]);
        const uint64_t b = std::min(offset + bytes, file_payload_begin[i] + file_payload_bytes[i]);
        if (a < b)
            std::memcpy(buf.get() + (a - offset),
                        files[i].data() + file_payload_start[i] + (a - file_payload_begin[i]), b - a);
    }
    owned.push_back(std::move(buf));
    return owned.back().get();
}

WeightBinding Artifact::Impl::resolve(const std::string& name, const detail::DirBinding& b,
                                      const std::vector<size_t>& tensor_of_object) const {
    WeightBinding w;
    w.name = name;
    bool whole_rows = true;
    uint64_t rows = 0, cols = 0, elems = 0;
    for (const detail::DirPart& part : b.parts) {
        const StoredTensor& t = tensors[tensor_of_object[part.object]];
        const uint64_t k = tensor_cols(t);
        const bool rows_ok = part.begin % k == 0 && part.end % k == 0;
        if (format_is_quantized(t.format) && !rows_ok)
            fail("binding " + name + ": range [" + std::to_string(part.begin) + "," +
                 std::to_string(part.end) + ") of " + std::string(format_name(t.format)) + " tensor " + t.id +
                 " does not cover whole rows");
        if (t.shape.size() != 2 || !rows_ok || (cols && cols != k))
            whole_rows = false;
        cols = k;
        rows += (part.end - part.begin) / k;
        elems += part.end - part.begin;
        w.pieces.push_back({&t, part.begin, part.end});
    }
    const StoredTensor& first = tensors[tensor_of_object[b.parts[0].object]];
    if (b.whole)
        w.shape = first.shape;
    else if (whole_rows)
        w.shape = {rows, cols};
    else
        w.shape = {elems};
    return w;
}

void Artifact::Impl::build() {
    std::vector<size_t> tensor_of_object(dir.objects.size(), SIZE_MAX);
    size_t n_tensors = 0;
    for (const detail::DirObject& o : dir.objects)
        n_tensors += o.is_tensor;
    tensors.reserve(n_tensors); // pointers into it are handed out below
    for (size_t i = 0; i < dir.objects.size(); ++i) {
        const detail::DirObject& o = dir.objects[i];
        const uint8_t* data = locate(o.id, o.offset, o.bytes);
        if (o.is_tensor) {
            tensor_of_object[i] = tensors.size();
            tensors.push_back(StoredTensor{o.id, o.format, o.shape, data, o.bytes});
        } else {
            resources.emplace(o.id, ArtifactResource{o.id, data, o.bytes});
        }
    }
    for (auto& [id, c] : dir.components)
        components.emplace(id, ArtifactComponent{c.id, c.config_json, c.target, c.resources,
                                                 c.proposal_json});
    for (const auto& [name, b] : dir.bindings)
        bindings.emplace(name, resolve(name, b, tensor_of_object));
    for (const detail::DirUse& u : dir.uses) {
        ArtifactUse use{u.parameter, u.input, u.activation_policy, {}};
        for (const auto& [role, b] : u.auxiliaries) {
            WeightBinding w = resolve(u.parameter + "/" + role, b, tensor_of_object);
            if (role == "activation_input_divisor") {
                float v;
                decode_elements(*w.pieces[0].tensor, w.pieces[0].elem_begin, w.pieces[0].elem_end, &v);
                if (!std::isfinite(v) || v <= 0.0f)
                    fail("activation_input_divisor of " + u.parameter + " must be finite and > 0, got " +
                         std::to_string(v));
            }
            use.auxiliaries.emplace(role, std::move(w));
        }
        uses.push_back(std::move(use));
    }
}

std::unique_ptr<Artifact> Artifact::open(const std::string& path) {
    auto impl = std::make_unique<Impl>();
    impl->path = path;
    impl->prefix = "artifact: " + path + ": ";
    impl->files.push_back(MappedFile::open(path, "artifact"));
    impl->check_entry_framing();
    impl->open_parts();
    impl->build();
    return std::unique_ptr<Artifact>(new Artifact(std::move(impl)));
}

Artifact::Artifact(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Artifact::~Artifact() = default;

const std::string& Artifact::path() const { return impl_->path; }
std::string Artifact::artifact_id_hex() const { return hex(impl_->artifact_id, 16); }

uint64_t Artifact::file_bytes() const {
    uint64_t n = 0;
    for (const MappedFile& f : impl_->files)
        n += f.size();
    return n;
}

uint64_t Artifact::payload_bytes() const { return impl_->dir.total_payload; }
size_t Artifact::file_count() const { return impl_->files.size(); }

const std::map<std::string, ArtifactComponent>& Artifact::components() const {
    return impl_->components;
}

const ArtifactComponent& Artifact::component(std::string_view id) const {
    auto it = impl_->components.find(std::string(id));
    if (it == impl_->components.end())
        impl_->fail("missing component " + std::string(id));
    return it->second;
}

bool Artifact::has_component(std::string_view id) const {
    return impl_->components.count(std::string(id)) != 0;
}

const ArtifactResource* Artifact::resource(std::string_view component, std::string_view role) const {
    auto c = impl_->components.find(std::string(component));
    if (c == impl_->components.end())
        return nullptr;
    auto r = c->second.resources.find(std::string(role));
    if (r == c->second.resources.end())
        return nullptr;
    auto it = impl_->resources.find(r->second);
    return it == impl_->resources.end() ? nullptr : &it->second;
}

const std::map<std::string, ArtifactResource>& Artifact::resources() const {
    return impl_->resources;
}

const std::vector<StoredTensor>& Artifact::tensors() const { return impl_->tensors; }

const std::map<std::string, WeightBinding>& Artifact::bindings() const { return impl_->bindings; }

const WeightBinding& Artifact::binding(std::string_view name) const {
    auto it = impl_->bindings.find(std::string(name));
    if (it == impl_->bindings.end())
        throw Error("artifact: missing parameter " + std::string(name));
    return it->second;
}

bool Artifact::has_binding(std::string_view name) const {
    return impl_->bindings.count(std::string(name)) != 0;
}

const std::vector<ArtifactUse>& Artifact::uses() const { return impl_->uses; }

std::string Artifact::metadata_json() const { return impl_->dir.metadata_json; }
std::string Artifact::provenance_json() const { return impl_->dir.provenance_json; }
std::string Artifact::metadata_name() const { return impl_->dir.metadata_name; }
bool Artifact::is_synthetic() const { return impl_->dir.synthetic; }

} // namespace ninfer::core
