// ninfer::ctl - `ninferctl perplexity`: exp(mean NLL) of a text file on the local backend.
#include "ctl/command_list.h"
#include "ctl/model_session.h"

#include "core/engine/perplexity.h"
#include "core/model/kv_codec.h"
#include "core/util/error.h"
#include "core/util/regular_file.h"

#include <chrono>
#include <cstdio>
#include <string>

namespace ninfer::ctl {

namespace {

constexpr const char* kPerplexityUsage =
    "usage: ninferctl perplexity ARTIFACT --text FILE [--context N] [--stride S]\n"
    "           [--device cpu|cuda] [--kv-dtype bf16|fp8|int8|f32]\n"
    "  Tokenizes FILE (no template, no BOS) and scores every token after the first with windows of\n"
    "  N tokens (default: the whole text, capped at the model's context) every S tokens (default N).\n"
    "  stdout: 'ppl P mean_nll X tokens T windows W'.\n";

} // namespace

int cmd_perplexity(int argc, char** argv) {
    std::string artifact, text_file, device, kv = "bf16";
    uint32_t context = 0, stride = 0;
    for (int i = 0; i < argc; ++i) {
        const std::string arg = argv[i];
        const bool has_value = i + 1 < argc;
        if (arg == "--text" && has_value) text_file = argv[++i];
        else if (arg == "--context" && has_value) context = uint32_t(parse_count("--context", argv[++i]));
        else if (arg == "--stride" && has_value) stride = uint32_t(parse_count("--stride", argv[++i]));
        else if (arg == "--device" && has_value) device = argv[++i];
        else if (arg == "--kv-dtype" && has_value) kv = argv[++i];
        else if (artifact.empty() && !arg.empty() && arg[0] != '-') artifact = arg;
        else {
            std::fputs(kPerplexityUsage, stderr);
            return 2;
        }
    }
    if (artifact.empty() || text_file.empty()) {
        std::fputs(kPerplexityUsage, stderr);
        return 2;
    }
    check_device(device);
    const std::string text = core::read_input_file(text_file, "perplexity");

    auto session = open_model_session(artifact);
    if (!session->tokenizer)
        throw Error("perplexity: the artifact carries no tokenizer.json");
    const std::vector<int32_t> ids = session->tokenizer->encode(text);
    if (context == 0)
        context = uint32_t(ids.size());
    BackendOptions bo;
    bo.device = device;
    bo.kv_dtype = core::kv_dtype_from_name(kv);
    bo.max_context = context;
    start_backend(*session, bo);
    const auto t0 = std::chrono::steady_clock::now();
    const core::PerplexityResult r = core::perplexity(*session->backend, ids, session->plan.max_context,
                                                      stride, session->plan.prefill_chunk);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("ppl %.9g mean_nll %.9f tokens %zu windows %zu\n", r.ppl, r.mean_nll, ids.size(), r.n_windows);
    std::fprintf(stderr, "scored %zu tokens in %.2f s (%.1f tok/s)\n", r.nll.size(), s,
                 double(r.nll.size()) / std::max(s, 1e-9));
    return 0;
}

} // namespace ninfer::ctl
