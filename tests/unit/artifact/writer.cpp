// ninfer tests - artifact writer: round trips, sharding, publication and cleanup.
#include "core/artifact/artifact.h"
#include "core/artifact/writer.h"
#include "core/formats/codec.h"
#include "core/formats/format.h"
#include "core/util/error.h"
#include "tests/unit/artifact/artifact_test_util.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <random>

using namespace ninfer;
using namespace ninfer::core;
using ninfer::test::ScratchDir;

namespace {

std::vector<float> random_values(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v)
        x = d(rng);
    return v;
}

std::vector<uint64_t> shape_for(TensorFormat f) {
    if (f == TensorFormat::Nvfp4)
        return {128, 64};
    if (format_is_direct(f))
        return {3, 5};
    return {3, 130};
}

} // namespace

TEST_CASE("writer round-trips every format bit-exactly", "[writer]") {
    ScratchDir dir;
    const std::string path = dir.file("all.ninfer");
    const TensorFormat formats[] = {TensorFormat::Bf16, TensorFormat::Fp32, TensorFormat::Int32,
                                    TensorFormat::Q4G64Fp16, TensorFormat::Q5G64Fp16,
                                    TensorFormat::Q6G64Fp16, TensorFormat::Q8G32Fp16,
                                    TensorFormat::Fp8E4m3fnRowBf16, TensorFormat::Nvfp4};
    std::vector<std::vector<uint8_t>> encoded;
    {
        ArtifactWriter w(path, {});
        w.add_resource("resource/text/tokenizer.json", test::as_bytes("{\"v\":1}"));
        for (size_t i = 0; i < std::size(formats); ++i) {
            auto shape = shape_for(formats[i]);
            auto values = random_values(shape[0] * shape[1], uint32_t(i));
            if (formats[i] == TensorFormat::Int32)
                for (float& v : values)
                    v = std::round(v * 100);
            encoded.push_back(encode(formats[i], shape, values));
            char id[32];
            std::snprintf(id, sizeof id, "weight/%06zu", i);
            w.add_tensor(id, formats[i], shape, encoded.back());
            w.bind(std::string("p/") + std::string(format_name(formats[i])), id);
        }
        w.add_component("text", R"({"x":1.5,"eps":9.999999974752427e-07,"theta":10000000.0,"n":-3,"s":"é\n"})", {}, {{"tokenizer.json", "resource/text/tokenizer.json"}},
                        R"({"domain":"indexed","rows":7})");
        w.add_component("mtp", R"({})", "text");
        w.set_metadata_json(R"({"name":"all-formats","synthetic":true})");
        w.set_provenance_json(R"({"tool":"test"})");
        w.finish();
    }
    auto a = Artifact::open(path);
    REQUIRE(a->tensors().size() == std::size(formats));
    for (size_t i = 0; i < std::size(formats); ++i) {
        const StoredTensor& t = a->tensors()[i];
        CHECK(t.format == formats[i]);
        CHECK(t.shape == shape_for(formats[i]));
        REQUIRE(t.bytes == encoded[i].size());
        CHECK(std::equal(t.data, t.data + t.bytes, encoded[i].begin()));
        CHECK(reinterpret_cast<uintptr_t>(t.data) % 256 == 0);
        const WeightBinding& b = a->binding(std::string("p/") + std::string(format_name(formats[i])));
        CHECK(b.shape == t.shape);
        REQUIRE(b.pieces.size() == 1);
        CHECK(b.pieces[0].tensor == &t);
    }
    CHECK(a->is_synthetic());
    CHECK(a->metadata_name() == "all-formats");
    CHECK(a->provenance_json() == R"({"tool":"test"})");
    CHECK(a->component("text").proposal_json == R"({"domain":"indexed","rows":7})");
    CHECK(a->component("mtp").target == "text");
    CHECK(a->component("text").config_json ==
          R"({"x":1.5,"eps":9.999999974752427e-07,"theta":10000000.0,"n":-3,"s":"é\n"})");
    REQUIRE(a->resource("text", "tokenizer.json"));
    CHECK(a->resource("text", "tokenizer.json")->text() == "{\"v\":1}");
    CHECK(a->artifact_id_hex().size() == 32);
    CHECK(a->file_count() == 1);
    CHECK_THROWS_WITH(a->binding("nope"), "artifact: missing parameter nope");
}
