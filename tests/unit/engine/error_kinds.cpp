// ninfer tests - errors carry their kind: slot operations, slot files and file I/O say NotFound,
// Busy, NoSpace or Io as an Errc, so no caller has to read the message.
#include "core/engine/scheduler.h"
#include "core/engine/slot_file.h"
#include "core/util/error.h"
#include "fake_backend.h"

#include <catch2/catch.hpp>

#include <cerrno>
#include <filesystem>

using namespace ninfer;
using namespace ninfer::core;

namespace {

template <typename Fn> Errc kind_of(Fn fn) {
    try {
        fn();
    } catch (const Error& e) {
        return e.kind();
    }
    FAIL("no ninfer::Error was thrown");
    return Errc::Internal;
}

} // namespace

TEST_CASE("slot operations report NotFound and Busy as kinds", "[error_kinds]") {
    test::FakeBackend backend(2);
    EngineStats stats;
    Scheduler s(backend, {.max_context = 1000, .prefill_chunk = 64}, stats);
    CHECK(kind_of([&] { s.slot_save(0); }) == Errc::NotFound); // the lane holds no sequence
    CHECK(kind_of([&] { s.slot_save(7); }) == Errc::NotFound); // no such lane
    CHECK(kind_of([&] { s.slot_erase(-1); }) == Errc::NotFound);

    GenerationRequest r;
    r.id = 1;
    r.prompt = {1, 2, 3};
    r.max_tokens = 1000 - 3;
    r.sink = std::make_shared<test::RecordingSink>();
    s.submit(std::move(r));
    s.step(); // admitted and running on lane 0
    LaneImage image;
    image.tokens = {4, 5, 6};
    CHECK(kind_of([&] { s.slot_restore(0, image); }) == Errc::Busy);
    CHECK(kind_of([&] { s.slot_erase(0); }) == Errc::Busy);
    CHECK(kind_of([&] { s.slot_restore(1, LaneImage{}); }) == Errc::Invalid); // nothing to restore
}

TEST_CASE("a missing slot file is NotFound; errno values map to kinds", "[error_kinds]") {
    auto missing = std::filesystem::temp_directory_path() / "ninfer-error-kinds-no-such.nslot";
    std::filesystem::remove(missing);
    CHECK(kind_of([&] { slot_file_read(missing.string(), {}, FileIoMode::Plain); }) == Errc::NotFound);
    CHECK(errc_of_errno(ENOENT) == Errc::NotFound);
    CHECK(errc_of_errno(ENOSPC) == Errc::NoSpace);
    CHECK(errc_of_errno(EDQUOT) == Errc::NoSpace);
    CHECK(errc_of_errno(EBUSY) == Errc::Busy);
    CHECK(errc_of_errno(EIO) == Errc::Io);
    CHECK(errc_of_errno(EACCES) == Errc::Io);
}

TEST_CASE("ErrorInfo keeps an Error's kind and calls anything else Internal", "[error_kinds]") {
    ErrorInfo busy = error_info(Error(Errc::Busy, "slot 1 is busy"));
    CHECK(busy.kind == Errc::Busy);
    CHECK(busy.message == "slot 1 is busy");
    CHECK(error_info(Error("artifact: bad magic")).kind == Errc::Invalid); // the default kind
    ErrorInfo other = error_info(std::out_of_range("vector::at"));
    CHECK(other.kind == Errc::Internal);
    CHECK(other.message == "vector::at");
}
