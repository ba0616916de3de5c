// ninfer::ctl - `ninferctl inspect FILE [--json] [--verify]`: what a .ninfer artifact holds, checked by
// the reader; --verify also checks every payload object's CRC-32C (core/artifact/checksums.h).
#include "ctl/command_list.h"

#include "core/artifact/artifact.h"
#include "core/artifact/checksums.h"
#include "core/model/vision_config.h"
#include "core/formats/format.h"
#include "core/util/json_writer.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <thread>

namespace ninfer::ctl {
namespace {

constexpr const char* kUsage =
    "usage: ninferctl inspect FILE.ninfer [--json] [--verify]\n"
    "  validates the artifact (every reader check) and prints its components with their configs,\n"
    "  tensors (id, shape, format, bytes), bindings, resources, bytes by format, metadata and\n"
    "  whether the weights are random (synthetic). --json prints one JSON document instead.\n"
    "  --verify also reads every payload byte and checks each object against the CRC-32C the\n"
    "  writer recorded (metadata.payload_crc32c); a mismatch names the tensor and exits 1, as does\n"
    "  an artifact written without checksums (by an older writer or upstream's).\n";

std::string shape_text(const std::vector<uint64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i)
        s += (i ? "," : "") + std::to_string(shape[i]);
    return s + "]";
}

struct FormatTotal {
    uint64_t tensors = 0, bytes = 0;
};

std::map<std::string, FormatTotal> bytes_by_format(const core::Artifact& a) {
    std::map<std::string, FormatTotal> totals;
    for (const core::StoredTensor& t : a.tensors()) {
        FormatTotal& f = totals[std::string(core::format_name(t.format))];
        ++f.tensors;
        f.bytes += t.bytes;
    }
    return totals;
}

void print_json(const core::Artifact& a, const core::PayloadVerifyResult* verified) {
    core::JsonWriter w;
    w.begin_object().member("path", a.path()).member("artifact_id", a.artifact_id_hex());
    w.member("file_bytes", a.file_bytes()).member("files", uint64_t(a.file_count()));
    w.member("payload_bytes", a.payload_bytes()).member("synthetic", a.is_synthetic());
    w.key("metadata").raw(a.metadata_json()).key("provenance").raw(a.provenance_json());
    if (verified)
        w.key("verify").begin_object().member("objects", verified->n_objects).member("bytes", verified->n_bytes)
            .member("seconds", verified->seconds).end_object();
    w.key("components").begin_object();
    for (const auto& [id, c] : a.components()) {
        w.key(id).begin_object().key("config").raw(c.config_json);
        if (c.target)
            w.member("target", *c.target);
        w.key("resources").begin_object();
        for (const auto& [role, rid] : c.resources)
            w.member(role, rid);
        w.end_object();
        if (!c.proposal_json.empty())
            w.key("proposal").raw(c.proposal_json);
        w.end_object();
    }
    w.end_object().key("tensors").begin_array();
    for (const core::StoredTensor& t : a.tensors()) {
        w.begin_object().member("id", t.id).key("shape").begin_array();
        for (uint64_t d : t.shape)
            w.value(d);
        w.end_array().member("format", core::format_name(t.format)).member("bytes", t.bytes).end_object();
    }
    w.end_array().member("bindings", uint64_t(a.bindings().size()));
    w.member("uses", uint64_t(a.uses().size())).key("resources").begin_array();
    for (const auto& [id, r] : a.resources())
        w.begin_object().member("id", id).member("bytes", r.bytes).end_object();
    w.end_array().key("bytes_by_format").begin_object();
    for (const auto& [name, f] : bytes_by_format(a))
        w.key(name).begin_object().member("tensors", f.tensors).member("bytes", f.bytes).end_object();
    w.end_object().end_object();
    std::printf("%s\n", w.take().c_str());
}

void print_human(const core::Artifact& a, const core::PayloadVerifyResult* verified) {
    std::printf("artifact    %s\n", a.path().c_str());
    std::printf("id          %s\n", a.artifact_id_hex().c_str());
    std::printf("files       %zu (%llu bytes on disk, %llu payload bytes)\n", a.file_count(),
                (unsigned long long)a.file_bytes(), (unsigned long long)a.payload_bytes());
    std::printf("name        %s\n", a.metadata_name().empty() ? "-" : a.metadata_name().c_str());
    std::printf("weights     %s\n", a.is_synthetic() ? "RANDOM (synthetic: seeded random weights, not a trained model)"
                                                     : "converted (not marked synthetic)");
    std::printf("metadata    %s\nprovenance  %s\n", core::metadata_without_payload_crc32c(a.metadata_json()).c_str(),
                a.provenance_json().c_str());
    if (verified)
        std::printf("verified    %llu objects, %llu bytes: every CRC-32C matches (%.2f s, %.2f GB/s)\n",
                    (unsigned long long)verified->n_objects, (unsigned long long)verified->n_bytes, verified->seconds,
                    verified->seconds > 0 ? double(verified->n_bytes) / verified->seconds / 1e9 : 0.0);
    std::printf("\ncomponents (%zu)\n", a.components().size());
    for (const auto& [id, c] : a.components()) {
        std::printf("  %s%s%s\n    config    %s\n", id.c_str(), c.target ? " -> target " : "",
                    c.target ? c.target->c_str() : "", c.config_json.c_str());
        for (const auto& [role, rid] : c.resources)
            std::printf("    resource  %-28s %s\n", role.c_str(), rid.c_str());
        if (!c.proposal_json.empty())
            std::printf("    proposal  %s\n", c.proposal_json.c_str());
    }
    if (a.has_component("vision")) { // the tower as the CPU backend would run it (docs/MODEL.md §9)
        const core::VisionConfig v = core::VisionConfig::parse(a.component("vision").config_json);
        std::printf("\nvision      %u blocks of %u (%u heads), MLP %u, patch %u px x %u frames, merge %u, "
                    "position grid %ux%u, merger out %s\n", v.depth, v.hidden_size, v.num_heads,
                    v.intermediate_size, v.patch_size, v.temporal_patch_size, v.spatial_merge_size,
                    v.position_grid_side(), v.position_grid_side(),
                    v.out_hidden_size ? std::to_string(v.out_hidden_size).c_str() : "(from vision/merger/fc2)");
    }
    std::printf("\ntensors (%zu)\n  %-40s %-22s %-20s %14s\n", a.tensors().size(), "ID", "SHAPE", "FORMAT", "BYTES");
    for (const core::StoredTensor& t : a.tensors())
        std::printf("  %-40s %-22s %-20s %14llu\n", t.id.c_str(), shape_text(t.shape).c_str(),
                    std::string(core::format_name(t.format)).c_str(), (unsigned long long)t.bytes);
    std::printf("\nbindings    %zu parameters, %zu uses\n", a.bindings().size(), a.uses().size());
    std::printf("\nresources (%zu)\n", a.resources().size());
    for (const auto& [id, r] : a.resources())
        std::printf("  %-48s %14llu\n", id.c_str(), (unsigned long long)r.bytes);
    std::printf("\nbytes by format\n  %-20s %8s %16s\n", "FORMAT", "TENSORS", "BYTES");
    for (const auto& [name, f] : bytes_by_format(a))
        std::printf("  %-20s %8llu %16llu\n", name.c_str(), (unsigned long long)f.tensors,
                    (unsigned long long)f.bytes);
}

} // namespace

int cmd_inspect(int argc, char** argv) {
    std::string path;
    bool json = false, verify = false;
    for (int i = 0; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--json")) {
            json = true;
        } else if (!std::strcmp(argv[i], "--verify")) {
            verify = true;
        } else if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
            std::fputs(kUsage, stdout);
            return 0;
        } else if (argv[i][0] == '-' || !path.empty()) {
            std::fputs(kUsage, stderr);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (path.empty()) {
        std::fputs(kUsage, stderr);
        return 2;
    }
    auto artifact = core::Artifact::open(path);
    if (artifact->is_synthetic())
        std::fprintf(stderr, "ninferctl inspect: warning: %s holds random (synthetic) weights\n", path.c_str());
    core::PayloadVerifyResult verified;
    if (verify) {
        verified = core::verify_payload_checksums(*artifact, std::max(1u, std::thread::hardware_concurrency()));
        if (!verified.has_checksums) {
            std::fprintf(stderr, "ninferctl inspect: %s records no payload checksums (metadata.payload_crc32c): "
                                 "nothing verified (ninferctl convert and artifact upgrade write them)\n", path.c_str());
            return 1;
        }
    }
    if (json)
        print_json(*artifact, verify ? &verified : nullptr);
    else
        print_human(*artifact, verify ? &verified : nullptr);
    return 0;
}

} // namespace ninfer::ctl
