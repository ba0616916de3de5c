// ninfer tests - catalogued journal events: stable, distinct 128-bit ids, each explained in systemd/ninfer.catalog.
#include "daemon/journal.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <set>
#include <sstream>

using namespace ninfer::daemon;

namespace {
const LogEvent kAllEvents[] = {LogEvent::ModelLoaded, LogEvent::SnapshotSaved, LogEvent::UpgradeDone,
                               LogEvent::ConfigReloaded, LogEvent::EngineFailed};
} // namespace

TEST_CASE("every catalogued event has a distinct 32-hex-digit MESSAGE_ID and a name", "[journal]") {
    std::set<std::string_view> ids, names;
    for (LogEvent e : kAllEvents) {
        std::string_view id = message_id(e);
        REQUIRE(id.size() == 32);
        CHECK(id.find_first_not_of("0123456789abcdef") == std::string_view::npos);
        CHECK(ids.insert(id).second);
        CHECK(names.insert(event_name(e)).second);
    }
    CHECK(message_id(LogEvent::ModelLoaded) == "57deee9d411f4123b8265e9ccc225398"); // ids never change
    CHECK(message_id(LogEvent::EngineFailed) == "349cb30e62aa4328822706244b97dac4");
}

TEST_CASE("an engine failure is logged at error priority, the other events at info", "[journal]") {
    CHECK(event_level(LogEvent::EngineFailed) == LogLevel::Error);
    CHECK(event_level(LogEvent::ModelLoaded) == LogLevel::Info);
    CHECK(event_level(LogEvent::ConfigReloaded) == LogLevel::Info);
}

TEST_CASE("the journal catalog explains every MESSAGE_ID the daemon sends", "[journal]") {
    std::ifstream in(std::string(NINFER_SOURCE_DIR) + "/systemd/ninfer.catalog");
    REQUIRE(in);
    std::stringstream text;
    text << in.rdbuf();
    for (LogEvent e : kAllEvents)
        CHECK(text.str().find("-- " + std::string(message_id(e)) + "\nSubject: ") != std::string::npos);
}
