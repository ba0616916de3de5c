// ninfer tests - the converter refuses bad input with a message naming the problem, and never
// leaves a file under the output name when it does.
#include "hf_fixture.h"

#include "core/convert/convert.h"
#include "core/convert/safetensors.h"
#include "core/util/error.h"

#include <catch2/catch.hpp>

using namespace ninfer;
using namespace ninfer::test;
using Catch::Matchers::Contains;

namespace {

core::ConvertRequest request(const Fixture& f, const std::string& out) {
    core::ConvertRequest r;
    r.src_dir = f.dir;
    r.out_path = out;
    r.recipe = core::Recipe::parse("bf16");
    return r;
}

void rewrite_weights(Fixture& f) {
    fs::remove(fs::path(f.dir) / "model.safetensors");
    write_safetensors((fs::path(f.dir) / "model.safetensors").string(), f.tensors);
}

} // namespace

TEST_CASE("a checkpoint without tokenizer.json needs --tokenizer", "[convert_errors]") {
    Fixture f = make_hf_checkpoint(temp_dir("no-tokenizer"), {});
    std::string tok = temp_dir("elsewhere/tokenizer.json");
    fs::rename(fs::path(f.dir) / "tokenizer.json", tok);
    std::string out = temp_dir("no-tokenizer.ninfer");
    core::ConvertRequest r = request(f, out);
    CHECK_THROWS_WITH(core::convert_checkpoint(r), Contains("no tokenizer") && Contains("--tokenizer"));
    CHECK_FALSE(fs::exists(out));
    r.tokenizer_file = tok;
    core::convert_checkpoint(r);
    CHECK(core::Artifact::open(out)->resource("text", "tokenizer.json")->bytes == fs::file_size(tok));
}

TEST_CASE("unknown architectures are refused by name", "[convert_errors]") {
    Fixture f = make_hf_checkpoint(temp_dir("llama"), {});
    write_text(fs::path(f.dir) / "config.json", "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\"}");
    CHECK_THROWS_WITH(core::convert_checkpoint(request(f, temp_dir("llama.ninfer"))),
                      Contains("unsupported architecture LlamaForCausalLM") && Contains("Qwen3_5ForCausalLM"));
}

TEST_CASE("a special token id not below vocab_size is refused", "[convert_errors]") {
    FixtureOptions o;
    o.special_base = 330; // vocab is 320
    Fixture f = make_hf_checkpoint(temp_dir("special"), o);
    CHECK_THROWS_WITH(core::convert_checkpoint(request(f, temp_dir("special.ninfer"))),
                      Contains("special token <|endoftext|> has id 330") && Contains("320"));
    // A generation_config stop id out of range is refused too.
    Fixture g = make_hf_checkpoint(temp_dir("stop"), {});
    write_text(fs::path(g.dir) / "generation_config.json", "{\"eos_token_id\":999}");
    CHECK_THROWS_WITH(core::convert_checkpoint(request(g, temp_dir("stop.ninfer"))),
                      Contains("eos_token_id has id 999"));
}

TEST_CASE("a missing tensor and a wrong shape are named", "[convert_errors]") {
    Fixture f = make_hf_checkpoint(temp_dir("missing"), {});
    f.tensors.erase("model.layers.1.linear_attn.in_proj_z.weight");
    rewrite_weights(f);
    std::string out = temp_dir("missing.ninfer");
    CHECK_THROWS_WITH(core::convert_checkpoint(request(f, out)),
                      Contains("lacks tensor model.layers.1.linear_attn.in_proj_z.weight"));
    CHECK_FALSE(fs::exists(out));

    Fixture g = make_hf_checkpoint(temp_dir("shape"), {});
    g.tensors["model.layers.3.self_attn.k_proj.weight"].shape = {32, 128};
    rewrite_weights(g);
    CHECK_THROWS_WITH(core::convert_checkpoint(request(g, temp_dir("shape.ninfer"))),
                      Contains("model.layers.3.self_attn.k_proj.weight has shape [32,128]") &&
                          Contains("implies [64,64]"));
}

TEST_CASE("requested components must exist in the checkpoint", "[convert_errors]") {
    Fixture f = make_hf_checkpoint(temp_dir("plain"), {});
    core::ConvertRequest r = request(f, temp_dir("plain.ninfer"));
    r.mtp = core::ComponentChoice::Include;
    CHECK_THROWS_WITH(core::convert_checkpoint(r), Contains("no mtp.* tensors"));
    r.mtp = core::ComponentChoice::Exclude, r.vision = core::ComponentChoice::Include;
    CHECK_THROWS_WITH(core::convert_checkpoint(r), Contains("no vision_config"));
}

TEST_CASE("an existing output is kept unless forced", "[convert_errors]") {
    Fixture f = make_hf_checkpoint(temp_dir("exists"), {});
    std::string out = temp_dir("exists.ninfer");
    write_text(out, "keep me");
    core::ConvertRequest r = request(f, out);
    CHECK_THROWS(core::convert_checkpoint(r));
    CHECK(fs::file_size(out) == 7);
    r.force = true;
    core::convert_checkpoint(r);
    CHECK(core::Artifact::open(out)->metadata_name() == "exists");
}

TEST_CASE("bad safetensors headers are refused with the file and reason", "[convert_errors]") {
    std::string dir = temp_dir("st");
    fs::create_directories(dir);
    auto write_raw = [&](const std::string& name, uint64_t n, const std::string& header, size_t data_bytes) {
        std::string path = dir + "/" + name;
        std::ofstream out(path, std::ios::binary);
        out.write(reinterpret_cast<const char*>(&n), 8);
        out << header << std::string(data_bytes, '\0');
        return path;
    };
    auto open = [](const std::string& p) { return core::SafetensorsCheckpoint::open_files({p}); };
    std::string ok = "{\"w\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,8]}}";
    CHECK_NOTHROW(open(write_raw("ok.safetensors", ok.size(), ok, 8)));
    {
        std::string p = dir + "/short.safetensors";
        write_text(p, "abc");
        CHECK_THROWS_WITH(open(p), Contains("short.safetensors") && Contains("truncated"));
    }
    CHECK_THROWS_WITH(open(write_raw("len.safetensors", 1 << 20, ok, 8)), Contains("header length"));
    std::string not_json = "[1,2,3]";
    CHECK_THROWS_WITH(open(write_raw("arr.safetensors", not_json.size(), not_json, 0)), Contains("not a JSON object"));
    std::string outside = "{\"w\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,8]}}";
    CHECK_THROWS_WITH(open(write_raw("out.safetensors", outside.size(), outside, 4)), Contains("outside the data area"));
    std::string count = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,8]}}";
    CHECK_THROWS_WITH(open(write_raw("count.safetensors", count.size(), count, 8)), Contains("need 16"));
    std::string missing = "{\"w\":{\"dtype\":\"BF16\",\"shape\":[2,2]}}";
    CHECK_THROWS_WITH(open(write_raw("miss.safetensors", missing.size(), missing, 8)), Contains("data_offsets"));
    std::string i64 = "{\"w\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}";
    auto c = open(write_raw("i64.safetensors", i64.size(), i64, 8));
    float out[1];
    CHECK_THROWS_WITH(c->read_rows_f32(*c->find("w"), 1, 0, 1, out), Contains("dtype I64"));
}

TEST_CASE("a shard index naming the wrong shard is refused", "[convert_errors]") {
    FixtureOptions o;
    o.shards = 2;
    Fixture f = make_hf_checkpoint(temp_dir("index"), o);
    std::string index = read_file_text_for_test((fs::path(f.dir) / "model.safetensors.index.json").string());
    size_t at = index.find("model-00001-of-00002");
    index.replace(at, 20, "model-00002-of-00002");
    write_text(fs::path(f.dir) / "model.safetensors.index.json", index);
    CHECK_THROWS_WITH(core::SafetensorsCheckpoint::open_dir(f.dir), Contains("is not in shard model-00002-of-00002"));
}
