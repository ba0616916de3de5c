// ninfer::ctl - `ninferctl version`.
#include "ctl/command_list.h"

#include <cstdio>

namespace ninfer::ctl {

int cmd_version(int, char**) {
    std::printf("ninferctl %s\n", NINFER_VERSION_STRING);
    return 0;
}

} // namespace ninfer::ctl
