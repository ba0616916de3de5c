// ninfer::ctl - `ninferctl render`: print the chat prompt our template renderer builds.
#include "ctl/command_list.h"

#include "core/artifact/artifact.h"
#include "core/frontend/chat_template.h"
#include "core/util/error.h"
#include "core/util/regular_file.h"

#include <cstdio>
#include <cstring>
#include <string>

namespace ninfer::ctl {

namespace {

constexpr const char* kRenderUsage =
    "usage: ninferctl render (ARTIFACT.ninfer | -) --messages FILE|- [--no-thinking] [--preserve-thinking]\n"
    "                        [--no-generation-prompt] [--vision-ids]\n"
    "  prints the prompt exactly (no newline added). FILE holds a JSON array of OpenAI-style\n"
    "  messages or {\"messages\": [...], \"tools\": [...]}. The template is our built-in renderer of\n"
    "  the Qwen3.5/3.6 template (the artifact's chat_template.jinja is carried, not interpreted);\n"
    "  the artifact is opened and checked; '-' renders without one.\n";

} // namespace

int cmd_render(int argc, char** argv) {
    std::string artifact_path, messages_path;
    core::ChatRenderOptions options;
    for (int i = 0; i < argc; ++i) {
        const char* arg = argv[i];
        if (std::strcmp(arg, "--messages") == 0 && i + 1 < argc) messages_path = argv[++i];
        else if (std::strcmp(arg, "--no-thinking") == 0) options.enable_thinking = false;
        else if (std::strcmp(arg, "--preserve-thinking") == 0) options.preserve_thinking = true;
        else if (std::strcmp(arg, "--no-generation-prompt") == 0) options.add_generation_prompt = false;
        else if (std::strcmp(arg, "--vision-ids") == 0) options.add_vision_id = true;
        else if (artifact_path.empty() && (arg[0] != '-' || std::strcmp(arg, "-") == 0)) artifact_path = arg;
        else {
            std::fputs(kRenderUsage, stderr);
            return 2;
        }
    }
    if (artifact_path.empty() || messages_path.empty()) {
        std::fputs(kRenderUsage, stderr);
        return 2;
    }
    try {
        if (artifact_path != "-") {
            const auto artifact = core::Artifact::open(artifact_path);
            if (!artifact->resource("text", "chat_template.jinja"))
                std::fprintf(stderr, "render: note: %s carries no chat_template.jinja\n", artifact_path.c_str());
        }
        const core::ChatConversation conversation = core::parse_chat_conversation_json(core::read_input_file(messages_path, "render"));
        const std::string prompt = core::render_chat_prompt(conversation, options);
        std::fwrite(prompt.data(), 1, prompt.size(), stdout);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
}

} // namespace ninfer::ctl
