// ninfer::daemon - ninferd's entry point: CLI actions (--help, --version, --check-config), then the daemon.
#include "core/util/error.h"
#include "daemon/config_load.h"
#include "daemon/model_loader.h"
#include "daemon/options.h"
#include "daemon/server.h"

#include <cstdio>

using namespace ninfer;
using namespace ninfer::daemon;

namespace {

// Validates everything a start would (settings, artifact, memory plan) and prints the result.
int check_config(const CommandLine& cli) {
    Settings settings = load_settings(cli);
    DaemonConfig config = to_daemon_config(settings);
    PlannedModel model = plan_model(config);
    std::printf("%s", settings.dump().c_str());
    if (!model.max_context_choice.empty()) std::printf("# %s\n", model.max_context_choice.c_str());
    if (!model.speculative_choice.empty()) std::printf("# %s\n", model.speculative_choice.c_str());
    std::printf("# model %s: %s\n# configuration OK\n", model.model_id.c_str(), model.plan.describe().c_str());
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    try {
        CommandLine cli = parse_command_line(argc, argv);
        if (cli.has_action("help")) {
            std::printf("%s", render_help("ninferd").c_str());
            return 0;
        }
        if (cli.has_action("help-scdoc")) {
            std::printf("%s", render_options_scdoc().c_str());
            return 0;
        }
        if (cli.has_action("version")) {
            std::printf("ninferd %s\n", NINFER_VERSION_STRING);
            return 0;
        }
        if (cli.has_action("check-config")) return check_config(cli);
        return run_daemon(cli);
    } catch (const Error& e) {
        std::fprintf(stderr, "ninferd: %s\n", e.what());
        return 2;
    }
}
