// ninfer fuzz - the slot file reader (core/engine/slot_file.h), which turns a file from the state
// directory into a LaneImage (core/backend/lane_image.h): header, checksums, identity, section
// directory, lengths. The expected identity is fixed (below); the seeds are files written for it.
// A bad file must throw ninfer::Error; any other exception or a crash is a bug. An image that
// reads must have exactly the sections and lengths the identity implies.
// NINFER_FUZZ_WRITE_SEEDS=DIR writes the seed slot files (tests/fuzz/corpus/slot_file/) and exits.
#include "core/engine/slot_file.h"
#include "core/util/error.h"
#include "tests/fuzz/fuzz_input_file.h"

#include <cstdio>
#include <cstdlib>

using namespace ninfer;
using namespace ninfer::core;

namespace {

SlotIdentity identity() {
    SlotIdentity id;
    id.artifact_id = artifact_id_from_hex("00112233445566778899aabbccddeeff");
    id.model_id = "fuzz-model";
    id.kv_dtype = KvDtype::Bf16;
    id.kv_bytes_per_token = 16;
    id.gdn_bytes = 48;
    id.max_context = 64;
    return id;
}

LaneImage image(uint32_t n_tokens, bool with_mtp) {
    LaneImage img;
    for (uint32_t i = 0; i < n_tokens; ++i) img.tokens.push_back(int32_t(i * 7));
    uint8_t x = 1;
    for (auto& b : img.add_section(LaneSectionTag::Kv, identity().kv_bytes_per_token * n_tokens)) b = x++;
    for (auto& b : img.add_section(LaneSectionTag::Gdn, identity().gdn_bytes)) b = x++;
    if (with_mtp)
        for (auto& b : img.add_section(LaneSectionTag::MtpKv, 24, false)) b = x++;
    return img;
}

void fail(const char* what) {
    std::fprintf(stderr, "fuzz_slot_file: %s\n", what);
    std::abort();
}

fuzz::InputFile* g_file;

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    if (const char* dir = std::getenv("NINFER_FUZZ_WRITE_SEEDS")) {
        slot_file_write(std::string(dir) + "/three.nslot", identity(), image(3, false), FileIoMode::Plain);
        slot_file_write(std::string(dir) + "/mtp.nslot", identity(), image(2, true), FileIoMode::Plain);
        std::exit(0);
    }
    g_file = new fuzz::InputFile();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const SlotIdentity id = identity();
    try {
        LaneImage img = slot_file_read(g_file->write(data, size), id, FileIoMode::Plain);
        if (img.tokens.size() > id.max_context) fail("more tokens than max_context");
        if (img.kv().size() != img.tokens.size() * id.kv_bytes_per_token) fail("kv section of the wrong length");
        if (img.gdn().size() != id.gdn_bytes) fail("gdn section of the wrong length");
    } catch (const Error&) {
    } catch (const std::exception& e) {
        std::fprintf(stderr, "fuzz_slot_file: a non-ninfer exception escaped: %s\n", e.what());
        std::abort();
    }
    return 0;
}
