// ninfer fuzz - the .ninfer artifact reader (core/artifact/artifact.h): header, JSON directory,
// object table, components, bindings, uses. The input is the entry file; part files it names do
// not exist (refused when opened). A bad file must throw ninfer::Error; any other exception or a
// crash is a bug. An artifact that opens has every tensor's and resource's bytes read (in bounds).
// NINFER_FUZZ_WRITE_SEEDS=DIR writes the seed artifacts (tests/fuzz/corpus/artifact/) and exits.
#include "core/artifact/artifact.h"
#include "core/artifact/writer.h"
#include "core/formats/codec.h"
#include "core/util/error.h"
#include "tests/fuzz/fuzz_input_file.h"

#include <cstdio>
#include <cstdlib>

using namespace ninfer;
using namespace ninfer::core;

namespace {

std::span<const uint8_t> bytes_of(std::string_view s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

void write_seeds(const std::string& dir) {
    ArtifactWriterOptions options;
    options.force = true;
    { // one bf16 tensor, one resource, one component
        ArtifactWriter w(dir + "/minimal.ninfer", options);
        std::vector<uint64_t> shape = {2, 2};
        w.add_tensor("weight/000000", TensorFormat::Bf16, shape, encode(TensorFormat::Bf16, shape, std::vector<float>{1, -2, 0.5f, 3}));
        w.add_resource("resource/text/tokenizer.json", bytes_of("{}"));
        w.add_component("text", R"({"hidden_size":2})", {}, {{"tokenizer.json", "resource/text/tokenizer.json"}});
        w.bind("p", "weight/000000");
        w.set_metadata_json(R"({"name":"tiny"})");
        w.finish();
    }
    { // a quantized tensor bound by rows, a use with an auxiliary, a second component
        ArtifactWriter w(dir + "/uses.ninfer", options);
        std::vector<uint64_t> q_shape = {2, 64}, d_shape = {};
        w.add_tensor("weight/000000", TensorFormat::Q4G64Fp16, q_shape,
                     encode(TensorFormat::Q4G64Fp16, q_shape, std::vector<float>(128, 0.25f)));
        w.add_tensor("auxiliary/000000", TensorFormat::Fp32, d_shape, encode(TensorFormat::Fp32, d_shape, std::vector<float>{2}));
        w.add_component("text", R"({"hidden_size":64})", {}, {}, R"({"domain":"full"})");
        w.add_component("mtp", R"({"architectures":["Qwen3_5MTP"]})", "text");
        w.bind_rows("a", "weight/000000", 0, 1);
        w.bind_rows("b", "weight/000000", 1, 2);
        w.add_use({"a", "text/layers/0/x", "AllowA4", {{"activation_input_divisor", {{"auxiliary/000000", 0, 1}}}}});
        w.set_metadata_json(R"({"name":"tiny","synthetic":true})");
        w.set_provenance_json(R"({"fuzz":1})");
        w.finish();
    }
}

fuzz::InputFile* g_file;

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    if (const char* dir = std::getenv("NINFER_FUZZ_WRITE_SEEDS")) {
        write_seeds(dir);
        std::exit(0);
    }
    g_file = new fuzz::InputFile();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        std::unique_ptr<Artifact> a = Artifact::open(g_file->write(data, size));
        uint64_t sum = 0;
        for (const StoredTensor& t : a->tensors()) {
            for (uint64_t i = 0; i < t.bytes; ++i) sum += t.data[i];
            uint64_t rows = tensor_rows(t), cols = tensor_cols(t);
            if (rows * cols <= 4096) { // the codecs on payload bytes nobody checked
                std::vector<float> out(rows * cols);
                decode_rows(t, 0, rows, out.data());
            }
        }
        for (const auto& [id, r] : a->resources())
            for (uint64_t i = 0; i < r.bytes; ++i) sum += r.data[i];
        for (const auto& [name, binding] : a->bindings())
            for (const WeightPiece& p : binding.pieces) sum += p.elem_end - p.elem_begin;
        (void)a->metadata_name();
        (void)a->is_synthetic();
        (void)a->uses();
        if (sum == 0xfeedfacecafeULL) std::fprintf(stderr, "fuzz_artifact: (keeps the reads)\n");
    } catch (const Error&) {
    } catch (const std::exception& e) {
        std::fprintf(stderr, "fuzz_artifact: a non-ninfer exception escaped: %s\n", e.what());
        std::abort();
    }
    return 0;
}
