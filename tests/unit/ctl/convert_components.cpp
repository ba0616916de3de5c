// ninfer tests - `ninferctl convert` keeps every component a checkpoint has unless --components
// narrows it (issue 28 item 8: converting an official checkpoint must not drop its MTP head).
#include "ctl/command_list.h"
#include "tests/unit/convert/hf_fixture.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace ninfer;
using namespace ninfer::test;

namespace {

int run_convert(std::vector<std::string> args) {
    std::vector<char*> argv;
    for (std::string& a : args)
        argv.push_back(a.data());
    return ctl::cmd_convert(int(argv.size()), argv.data());
}

} // namespace

TEST_CASE("convert keeps mtp and vision by default and --components narrows", "[convert_components]") {
    FixtureOptions o;
    o.multimodal = true, o.mtp = true, o.vision = true;
    Fixture f = make_hf_checkpoint(temp_dir("ctl-components"), o);

    const std::string all = temp_dir("ctl-components-all.ninfer");
    REQUIRE(run_convert({f.dir, all, "--recipe", "bf16", "--force"}) == 0);
    auto a = core::Artifact::open(all);
    CHECK(a->has_component("mtp"));
    CHECK(a->has_component("vision"));

    const std::string text_mtp = temp_dir("ctl-components-text-mtp.ninfer");
    REQUIRE(run_convert({f.dir, text_mtp, "--recipe", "bf16", "--components", "text,mtp", "--force"}) == 0);
    auto b = core::Artifact::open(text_mtp);
    CHECK(b->has_component("mtp"));
    CHECK_FALSE(b->has_component("vision"));

    const std::string text = temp_dir("ctl-components-text.ninfer");
    REQUIRE(run_convert({f.dir, text, "--recipe", "bf16", "--components", "text", "--force"}) == 0);
    auto c = core::Artifact::open(text);
    CHECK_FALSE(c->has_component("mtp"));
    CHECK_FALSE(c->has_component("vision"));

    CHECK(run_convert({f.dir, text, "--components", "text,draft", "--force"}) == 2);
}
