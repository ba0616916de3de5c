// ninfer tests - ninferd's --speculative auto (daemon/model_loader.h resolve_speculative): mtp:3 only
// on the CUDA backend with an MTP head, off elsewhere; explicit settings pass through unchanged.
#include "daemon/model_loader.h"

#include <catch2/catch.hpp>

using namespace ninfer::daemon;

TEST_CASE("speculative auto: mtp:3 on the CUDA backend with a head, else off", "[speculative_default]") {
    CHECK(resolve_speculative("auto", "cuda", true) == "mtp:3");
    CHECK(resolve_speculative("auto", "cuda", false) == "off");
    CHECK(resolve_speculative("auto", "cpu", true) == "off");
    CHECK(resolve_speculative("auto", "cpu", false) == "off");
    CHECK(resolve_speculative("auto", "script", true) == "off");
}

TEST_CASE("speculative: an explicit setting is served as given", "[speculative_default]") {
    for (const char* s : {"off", "mtp:1", "mtp:5", "ngram:3"}) {
        CHECK(resolve_speculative(s, "cuda", true) == s);
        CHECK(resolve_speculative(s, "cpu", false) == s); // plan_model refuses mtp:K without a head itself
    }
}
