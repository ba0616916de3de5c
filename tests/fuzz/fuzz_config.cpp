// ninfer fuzz - ninferd's config file parser (daemon/config_load.h): apply_config_text on the
// input as a file's text, then to_daemon_config's typed conversion and cross-option rules. Bad
// text throws ninfer::Error naming file:line; anything else (another exception, a crash) is a bug.
#include "core/util/error.h"
#include "daemon/config_load.h"

#include <cstdio>
#include <cstdlib>

using namespace ninfer::daemon;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        Settings settings;
        settings.set("artifact", "/nonexistent/m.ninfer", "fuzz");
        apply_config_text(settings, text, "fuzz.conf");
        (void)to_daemon_config(settings);
    } catch (const ninfer::Error&) {
    } catch (const std::exception& e) {
        std::fprintf(stderr, "fuzz: config text threw a non-ninfer error: %s\n", e.what());
        std::abort();
    }
    return 0;
}
