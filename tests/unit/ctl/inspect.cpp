// ninfer tests - `ninferctl inspect` on a written artifact: human tables and one JSON document.
#include "core/artifact/writer.h"
#include "core/formats/codec.h"
#include "ctl/command_list.h"

#include <catch2/catch.hpp>
#include <simdjson.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

using namespace ninfer;
using namespace ninfer::core;

namespace {

struct Output {
    int rc;
    std::string out, err;
};

// Runs the inspect handler with stdout and stderr captured in temp files.
Output run_inspect(std::vector<std::string> args, const std::string& dir) {
    std::vector<char*> argv;
    for (std::string& a : args)
        argv.push_back(a.data());
    const std::string out_path = dir + "/out.txt", err_path = dir + "/err.txt";
    std::fflush(stdout);
    std::fflush(stderr);
    const int saved_out = ::dup(1), saved_err = ::dup(2);
    FILE* out = std::fopen(out_path.c_str(), "w");
    FILE* err = std::fopen(err_path.c_str(), "w");
    ::dup2(::fileno(out), 1);
    ::dup2(::fileno(err), 2);
    int rc;
    try {
        rc = ctl::cmd_inspect(int(argv.size()), argv.data());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        rc = 1;
    }
    std::fflush(stdout);
    std::fflush(stderr);
    ::dup2(saved_out, 1);
    ::dup2(saved_err, 2);
    ::close(saved_out);
    ::close(saved_err);
    std::fclose(out);
    std::fclose(err);
    auto slurp = [](const std::string& p) {
        std::ifstream in(p);
        std::stringstream s;
        s << in.rdbuf();
        return s.str();
    };
    return {rc, slurp(out_path), slurp(err_path)};
}

struct Dir {
    std::string path;
    Dir() {
        std::string t = (std::filesystem::temp_directory_path() / "ninfer-inspect-XXXXXX").string();
        path = ::mkdtemp(t.data());
    }
    ~Dir() { std::filesystem::remove_all(path); }
};

void write_artifact(const std::string& path, bool synthetic) {
    ArtifactWriter w(path, {});
    std::vector<uint64_t> s1 = {4, 64}, s2 = {64};
    w.add_resource("resource/text/tokenizer.json", std::span(reinterpret_cast<const uint8_t*>("{\"m\":1}"), 7));
    w.add_tensor("weight/000000", TensorFormat::Q4G64Fp16, s1, encode(TensorFormat::Q4G64Fp16, s1, std::vector<float>(256, 0.5f)));
    w.add_tensor("weight/000001", TensorFormat::Bf16, s2, encode(TensorFormat::Bf16, s2, std::vector<float>(64, 1.0f)));
    w.bind_rows("text/layers/0/attention/query", "weight/000000", 0, 2);
    w.bind_rows("text/layers/0/attention/key", "weight/000000", 2, 4);
    w.bind("text/layers/0/input_norm", "weight/000001");
    w.add_component("text", R"({"hidden_size":64,"rms_norm_eps":1e-06})", {},
                    {{"tokenizer.json", "resource/text/tokenizer.json"}});
    w.set_metadata_json(synthetic ? R"({"name":"tiny","synthetic":true})" : R"({"name":"tiny"})");
    w.finish();
}

} // namespace

TEST_CASE("inspect --json prints one document describing the artifact", "[inspect]") {
    Dir dir;
    const std::string path = dir.path + "/a.ninfer";
    write_artifact(path, true);
    Output o = run_inspect({path, "--json"}, dir.path);
    REQUIRE(o.rc == 0);
    CHECK(o.err.find("random (synthetic) weights") != std::string::npos);
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    REQUIRE(parser.parse(o.out).get(doc) == simdjson::SUCCESS);
    CHECK(doc["synthetic"].get_bool().value());
    CHECK(doc["bindings"].get_uint64().value() == 3);
    CHECK(doc["components"]["text"]["config"]["hidden_size"].get_uint64().value() == 64);
    CHECK(doc["components"]["text"]["resources"]["tokenizer.json"].get_string().value() ==
          "resource/text/tokenizer.json");
    auto tensors = doc["tensors"].get_array().value();
    REQUIRE(tensors.size() == 2);
    CHECK(tensors.at(0)["format"].get_string().value() == "q4_g64_fp16");
    CHECK(tensors.at(0)["shape"].at(1).get_uint64().value() == 64);
    CHECK(tensors.at(1)["bytes"].get_uint64().value() == 128);
    CHECK(doc["bytes_by_format"]["bf16"]["bytes"].get_uint64().value() == 128);
    CHECK(doc["bytes_by_format"]["q4_g64_fp16"]["tensors"].get_uint64().value() == 1);
    CHECK(doc["resources"].at(0)["bytes"].get_uint64().value() == 7);
    CHECK(doc["metadata"]["name"].get_string().value() == "tiny");
    CHECK(doc["file_bytes"].get_uint64().value() == std::filesystem::file_size(path));
}

TEST_CASE("inspect prints human tables and refuses bad input", "[inspect]") {
    Dir dir;
    const std::string path = dir.path + "/b.ninfer";
    write_artifact(path, false);
    Output o = run_inspect({path}, dir.path);
    REQUIRE(o.rc == 0);
    CHECK(o.err.empty());
    CHECK(o.out.find("weight/000000") != std::string::npos);
    CHECK(o.out.find("[4,64]") != std::string::npos);
    CHECK(o.out.find("q4_g64_fp16") != std::string::npos);
    CHECK(o.out.find("not marked synthetic") != std::string::npos);
    CHECK(o.out.find("3 parameters") != std::string::npos);
    CHECK(run_inspect({}, dir.path).rc == 2);
    CHECK(run_inspect({path, "--bogus"}, dir.path).rc == 2);
    std::ofstream(dir.path + "/bad.ninfer") << "not an artifact at all, just text";
    Output bad = run_inspect({dir.path + "/bad.ninfer"}, dir.path);
    CHECK(bad.rc == 1);
    CHECK(bad.err.find("wrong magic") != std::string::npos);
}
