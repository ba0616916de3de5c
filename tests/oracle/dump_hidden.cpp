// oracle_dump_hidden - test-only tool for tests/oracle/make_mtp_reference.py: the CPU model's
// final-normed hidden states (after model.norm, docs/MODEL.md §8's h_t) for given token ids.
//
// Contract:
//   oracle_dump_hidden [--tokenizer FILE] HF_DIR WORK_DIR NAME...
// - Converts the checkpoint HF_DIR (recipe bf16, the weights as stored) to WORK_DIR/model.ninfer
//   (--tokenizer as `ninferctl convert --tokenizer`, for a checkpoint without tokenizer.json).
// - Per NAME: reads the ids of WORK_DIR/NAME.ids (whitespace-separated integers), runs them through
//   the CPU ModelRunner as one fresh sequence (tests/unit/cpu/lane_forward.h; KV in f32), and writes
//   WORK_DIR/NAME.f32: ids × hidden_size little-endian float32, row t = h_t.
// - Exit 0 on success; 2 on bad usage or input (a message on stderr), 1 on any other error.
// The script does not trust these rows: it checks that lm_head(h) reproduces the committed
// transformers references before the MTP head sees them (tests/oracle/README.md, MTP reference).
#include "core/artifact/artifact.h"
#include "core/convert/convert.h"
#include "core/model/memory_plan.h"
#include "core/model/weights.h"
#include "tests/unit/cpu/lane_forward.h"

#include <cstdio>
#include <exception>
#include <stdexcept>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

using namespace ninfer::core;

namespace {

struct Usage {
    std::string message;
};

std::vector<int32_t> read_ids(const std::string& path, int64_t vocab) {
    std::ifstream in(path);
    if (!in)
        throw Usage{"cannot read " + path};
    std::vector<int32_t> ids;
    int64_t x = 0;
    while (in >> x) {
        if (x < 0 || x >= vocab)
            throw Usage{path + ": id " + std::to_string(x) + " outside 0.." + std::to_string(vocab - 1)};
        ids.push_back(int32_t(x));
    }
    if (!in.eof())
        throw Usage{path + ": not a list of integers"};
    if (ids.empty())
        throw Usage{path + ": no ids"};
    return ids;
}

void dump(const ModelWeights& w, const std::vector<int32_t>& ids, const std::string& out_path) {
    MemoryRequest req;
    req.max_context = uint32_t(ids.size());
    req.kv_dtype = KvDtype::F32;
    req.prefill_chunk = uint32_t(ids.size());
    req.weight_bytes = w.stored_bytes();
    req.available_bytes = 1ull << 34;
    const MemoryPlan plan = MemoryPlan::make(w.config, req);
    const std::vector<float> rows = ninfer::test::final_hidden_rows(w, plan, ids);
    std::ofstream out(out_path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(rows.data()), std::streamsize(rows.size() * sizeof(float)));
    if (!out)
        throw std::runtime_error("cannot write " + out_path);
}

} // namespace

int main(int argc, char** argv) {
    try {
        std::vector<std::string> args(argv + 1, argv + argc);
        std::string tokenizer;
        if (args.size() >= 2 && args[0] == "--tokenizer") {
            tokenizer = args[1];
            args.erase(args.begin(), args.begin() + 2);
        }
        if (args.size() < 3)
            throw Usage{"usage: oracle_dump_hidden [--tokenizer FILE] HF_DIR WORK_DIR NAME..."};
        ConvertRequest conv;
        conv.src_dir = args[0];
        conv.out_path = args[1] + "/model.ninfer";
        conv.tokenizer_file = tokenizer;
        conv.recipe = Recipe::parse("bf16");
        conv.force = true;
        convert_checkpoint(conv);
        auto artifact = Artifact::open(conv.out_path);
        const ModelWeights w = ModelWeights::from_artifact(*artifact);
        for (size_t i = 2; i < args.size(); ++i) {
            const std::string stem = args[1] + "/" + args[i];
            const std::vector<int32_t> ids = read_ids(stem + ".ids", w.config.vocab_size);
            dump(w, ids, stem + ".f32");
            std::cout << args[i] << ": " << ids.size() << " rows of " << w.config.hidden_size << "\n";
        }
        return 0;
    } catch (const Usage& u) {
        std::cerr << "oracle_dump_hidden: " << u.message << "\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "oracle_dump_hidden: " << e.what() << "\n";
        return 1;
    }
}
