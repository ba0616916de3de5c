// ninfer::core - read config.json, generation_config.json and the tokenizer of an HF checkpoint.
#include "core/convert/hf_source.h"

#include "core/util/error.h"
#include "core/util/regular_file.h"

#include <simdjson.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>

namespace ninfer::core {
namespace {

namespace fs = std::filesystem;
using simdjson::dom::element;
using simdjson::dom::object;

[[noreturn]] void fail(const std::string& why) { throw Error("convert: " + why); }

struct KnownArchitecture {
    std::string_view name;
    bool multimodal;
    bool moe;
};
constexpr KnownArchitecture kArchitectures[] = {
    {"Qwen3_5ForConditionalGeneration", true, false},
    {"Qwen3_5MoeForConditionalGeneration", true, true},
    {"Qwen3_5ForCausalLM", false, false},
    {"Qwen3_5MoeForCausalLM", false, true},
};

object parse_object(simdjson::dom::parser& parser, const std::string& text, const std::string& what) {
    object o;
    if (parser.parse(text).get_object().get(o) != simdjson::SUCCESS)
        fail(what + " is not a JSON object");
    return o;
}

uint32_t get_u32(const object& o, const char* key) {
    uint64_t u = 0;
    if (o[key].get_uint64().get(u) != simdjson::SUCCESS || u > 0xffffffffu)
        return 0;
    return uint32_t(u);
}

std::optional<std::string> read_if_exists(const fs::path& p) {
    if (!fs::exists(p))
        return std::nullopt;
    return read_file_text(p.string());
}

// A token named in tokenizer_config.json: a string or {"content": "..."}; "" if absent/null.
std::string token_text(const object& config, const char* key) {
    element e;
    if (config[key].get(e) != simdjson::SUCCESS || e.is_null())
        return {};
    std::string_view s;
    if (e.get_string().get(s) == simdjson::SUCCESS)
        return std::string(s);
    if (e["content"].get_string().get(s) == simdjson::SUCCESS)
        return std::string(s);
    return {};
}

void check_id(uint64_t id, uint64_t vocab_size, const std::string& what) {
    if (id >= vocab_size)
        fail(what + " has id " + std::to_string(id) + ", not below the vocabulary size " +
             std::to_string(vocab_size) + " (vocab_size in config.json)");
}

} // namespace

std::string read_file_text(const std::string& path) {
    return read_regular_file(path, "convert");
}

std::vector<TokenText> special_tokens(std::string_view tokenizer_json, std::string_view tokenizer_config_json) {
    std::vector<TokenText> out;
    simdjson::dom::parser parser;
    object root = parse_object(parser, std::string(tokenizer_json), "tokenizer.json");
    simdjson::dom::array added;
    if (root["added_tokens"].get_array().get(added) == simdjson::SUCCESS) {
        for (element t : added) {
            uint64_t id;
            std::string_view content;
            if (t["id"].get_uint64().get(id) != simdjson::SUCCESS ||
                t["content"].get_string().get(content) != simdjson::SUCCESS)
                fail("tokenizer.json added_tokens entries need id and content");
            out.push_back({std::string(content), id});
        }
    }
    if (!tokenizer_config_json.empty()) {
        simdjson::dom::parser p2;
        object config = parse_object(p2, std::string(tokenizer_config_json), "tokenizer_config.json");
        object decoder;
        if (config["added_tokens_decoder"].get_object().get(decoder) == simdjson::SUCCESS) {
            for (auto [key, value] : decoder) {
                std::string_view content;
                uint64_t id = 0;
                auto [ptr, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
                if (ec != std::errc() || ptr != key.data() + key.size() ||
                    value["content"].get_string().get(content) != simdjson::SUCCESS)
                    fail("tokenizer_config.json added_tokens_decoder entry \"" + std::string(key) +
                         "\" needs a numeric id and content");
                if (!find_token_id(out, content))
                    out.push_back({std::string(content), id});
            }
        }
    }
    return out;
}

std::optional<uint64_t> find_token_id(const std::vector<TokenText>& tokens, std::string_view text) {
    for (const TokenText& t : tokens)
        if (t.text == text)
            return t.id;
    return std::nullopt;
}

void check_token_ids(uint64_t vocab_size, const TextResources& r) {
    std::vector<TokenText> specials = special_tokens(r.tokenizer_json, r.tokenizer_config_json);
    for (const TokenText& t : specials)
        check_id(t.id, vocab_size, "special token " + t.text);

    simdjson::dom::parser parser;
    object tok = parse_object(parser, r.tokenizer_json, "tokenizer.json");
    object vocab;
    if (tok["model"]["vocab"].get_object().get(vocab) == simdjson::SUCCESS) {
        for (auto [text, id] : vocab) {
            uint64_t u;
            if (id.get_uint64().get(u) != simdjson::SUCCESS)
                fail("tokenizer.json vocab entries must map to non-negative integer ids");
            check_id(u, vocab_size, "token \"" + std::string(text) + "\" of tokenizer.json");
        }
    }

    simdjson::dom::parser p2;
    object config = parse_object(p2, r.tokenizer_config_json, "tokenizer_config.json");
    for (const char* key : {"bos_token", "eos_token", "pad_token", "unk_token"}) {
        std::string text = token_text(config, key);
        if (text.empty())
            continue;
        std::optional<uint64_t> id = find_token_id(specials, text);
        if (!id) {
            uint64_t u;
            if (vocab.size() == 0 || vocab[text].get_uint64().get(u) != simdjson::SUCCESS)
                fail(std::string("tokenizer_config.json ") + key + " \"" + text +
                     "\" is not a token of tokenizer.json");
            id = u;
        }
        check_id(*id, vocab_size, std::string("tokenizer_config.json ") + key + " " + text);
    }

    simdjson::dom::parser p3;
    object gen = parse_object(p3, r.generation_config_json, "generation_config.json");
    for (const char* key : {"eos_token_id", "bos_token_id", "pad_token_id"}) {
        element e;
        if (gen[key].get(e) != simdjson::SUCCESS || e.is_null())
            continue;
        std::vector<element> ids;
        simdjson::dom::array list;
        if (e.get_array().get(list) == simdjson::SUCCESS)
            for (element x : list)
                ids.push_back(x);
        else
            ids.push_back(e);
        for (element x : ids) {
            uint64_t u;
            if (x.get_uint64().get(u) != simdjson::SUCCESS)
                fail(std::string("generation_config.json ") + key + " must be an id or a list of ids");
            check_id(u, vocab_size, std::string("generation_config.json ") + key);
        }
    }
}

std::string generation_config_for(const std::vector<uint64_t>& eos_ids, std::optional<uint64_t> pad_id) {
    std::string s = "{\"eos_token_id\":[";
    for (size_t i = 0; i < eos_ids.size(); ++i)
        s += (i ? "," : "") + std::to_string(eos_ids[i]);
    s += "]";
    if (pad_id)
        s += ",\"pad_token_id\":" + std::to_string(*pad_id);
    return s + "}\n";
}

std::string chat_template_of(std::string_view tokenizer_config_json) {
    simdjson::dom::parser parser;
    object config = parse_object(parser, std::string(tokenizer_config_json), "tokenizer_config.json");
    std::string_view s;
    if (config["chat_template"].get_string().get(s) == simdjson::SUCCESS)
        return std::string(s);
    // Some tokenizers keep a list of named templates; the "default" one renders chats.
    simdjson::dom::array list;
    if (config["chat_template"].get_array().get(list) == simdjson::SUCCESS)
        for (element t : list) {
            std::string_view name;
            if (t["name"].get_string().get(name) == simdjson::SUCCESS && name == "default" &&
                t["template"].get_string().get(s) == simdjson::SUCCESS)
                return std::string(s);
        }
    return {};
}

HfSource read_hf_source(const std::string& dir, const std::string& tokenizer_file) {
    const fs::path d(dir);
    if (!fs::is_directory(d))
        fail(dir + " is not a checkpoint directory");
    HfSource src;
    std::string config_text = read_file_text((d / "config.json").string());
    simdjson::dom::parser parser;
    object root = parse_object(parser, config_text, "config.json");
    std::string_view arch;
    if (root["architectures"].at(0).get_string().get(arch) != simdjson::SUCCESS)
        fail("config.json has no architectures list");
    const KnownArchitecture* known = nullptr;
    for (const KnownArchitecture& a : kArchitectures)
        if (a.name == arch)
            known = &a;
    if (!known)
        fail("unsupported architecture " + std::string(arch) +
             " (supported: Qwen3_5ForConditionalGeneration, Qwen3_5MoeForConditionalGeneration, "
             "Qwen3_5ForCausalLM, Qwen3_5MoeForCausalLM)");
    src.architecture = std::string(arch);
    src.multimodal = known->multimodal;
    object text = root;
    if (known->multimodal && root["text_config"].get_object().get(text) != simdjson::SUCCESS)
        fail("config.json of " + src.architecture + " has no text_config");
    src.config = ModelConfig::from_json(simdjson::minify(text));
    if (src.config.is_moe() != known->moe)
        fail("config.json: architecture " + src.architecture + " does not match model_type " +
             src.config.model_type);
    src.mtp_num_hidden_layers = get_u32(text, "mtp_num_hidden_layers");
    object vision;
    if (known->multimodal && root["vision_config"].get_object().get(vision) == simdjson::SUCCESS) {
        src.has_vision_config = true;
        src.vision = VisionConfig::parse(simdjson::minify(vision));
    }

    TextResources& r = src.resources;
    fs::path tok_path = tokenizer_file.empty() ? d / "tokenizer.json" : fs::path(tokenizer_file);
    if (!fs::exists(tok_path))
        fail(tokenizer_file.empty()
                 ? "no tokenizer: " + tok_path.string() + " is missing; pass --tokenizer FILE"
                 : "tokenizer file " + tok_path.string() + " does not exist");
    r.tokenizer_json = read_file_text(tok_path.string());
    std::optional<std::string> tok_config = read_if_exists(d / "tokenizer_config.json");
    if (!tok_config && !tokenizer_file.empty())
        tok_config = read_if_exists(tok_path.parent_path() / "tokenizer_config.json");
    if (!tok_config)
        fail("no tokenizer_config.json in " + dir);
    r.tokenizer_config_json = *tok_config;
    std::optional<std::string> jinja = read_if_exists(d / "chat_template.jinja");
    r.chat_template = jinja ? *jinja : chat_template_of(r.tokenizer_config_json);
    if (r.chat_template.empty())
        fail("no chat template: neither " + (d / "chat_template.jinja").string() +
             " nor a chat_template in tokenizer_config.json");
    if (std::optional<std::string> gen = read_if_exists(d / "generation_config.json")) {
        r.generation_config_json = *gen;
    } else {
        simdjson::dom::parser p2;
        object tc = parse_object(p2, r.tokenizer_config_json, "tokenizer_config.json");
        std::string eos = token_text(tc, "eos_token");
        std::optional<uint64_t> id =
            eos.empty() ? std::nullopt : find_token_id(special_tokens(r.tokenizer_json, r.tokenizer_config_json), eos);
        if (!id)
            fail("no generation_config.json and no eos_token in tokenizer_config.json to stop on");
        r.generation_config_json = generation_config_for({*id}, std::nullopt);
    }
    check_token_ids(src.config.vocab_size, r);
    for (const char* role : {"preprocessor_config.json", "video_preprocessor_config.json"})
        if (std::optional<std::string> bytes = read_if_exists(d / role))
            src.vision_resources.emplace_back(role, *bytes);
    return src;
}

} // namespace ninfer::core
