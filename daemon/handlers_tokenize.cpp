// ninfer::daemon - POST /tokenize and POST /detokenize (llama.cpp's shapes), off the loop thread.
#include "core/frontend/unicode_utf8.h"
#include "core/util/json_writer.h"
#include "daemon/api_common.h"
#include "daemon/chat_session.h"
#include "daemon/request_json.h"
#include "daemon/routes.h"

namespace ninfer::daemon {
namespace {

using namespace request_json;
using simdjson::dom::element;

using TokenizerWork = std::function<std::string(simdjson::dom::object body, const core::Tokenizer& tokenizer)>;

// Parses the body and runs `work` (returning the JSON answer) on the pool; answers 200 with it,
// or the error in the OpenAI shape.
void answer_off_loop(DaemonContext& ctx, const HttpRequest& request, std::shared_ptr<ResponseWriter> writer,
                     TokenizerWork work) {
    require_ready(ctx);
    writer->add_header("x-request-id", std::to_string(ctx.next_request_id++));
    auto body = std::make_shared<simdjson::padded_string>(request.body);
    auto frontend = ctx.frontend;
    auto answer = std::make_shared<std::string>();
    DaemonContext* c = &ctx;
    run_off_loop(
        ctx.loop,
        [body, frontend, answer, work = std::move(work)] {
            simdjson::dom::parser parser;
            *answer = work(parse_json_object(parser, *body), frontend->tokenizer());
        },
        [c, writer, answer](std::optional<ApiError> error) {
            if (!writer->is_open()) return;
            if (error) return respond_error(*c, *writer, *error);
            writer->send(200, "application/json", *answer);
        });
}

} // namespace

// {"content", "parse_special" (default true), "with_pieces"} -> {"tokens": [id | {id, piece}]};
// add_special is accepted and has no effect (Qwen adds no BOS).
void handle_tokenize(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer) {
    answer_off_loop(ctx, request, writer, [](simdjson::dom::object root, const core::Tokenizer& tok) {
        element e;
        if (root["content"].get(e)) fail("content", "'content' is required", "");
        std::string content = string_of(e, "content");
        core::EncodeOptions options;
        if (!root["parse_special"].get(e) && !e.is_null()) options.split_special_tokens = !bool_of(e, "parse_special");
        bool with_pieces = !root["with_pieces"].get(e) && !e.is_null() && bool_of(e, "with_pieces");
        std::vector<int32_t> ids = tok.encode(content, options);
        core::JsonWriter w;
        w.begin_object().key("tokens").begin_array();
        for (int32_t id : ids) {
            if (!with_pieces) {
                w.value(int64_t(id));
                continue;
            }
            std::string_view bytes = tok.token_bytes(id);
            w.begin_object().member("id", int64_t(id)).key("piece");
            if (core::is_valid_utf8(bytes)) {
                w.value(bytes);
            } else { // a partial UTF-8 sequence: its bytes, as llama.cpp does
                w.begin_array();
                for (unsigned char b : bytes) w.value(int(b));
                w.end_array();
            }
            w.end_object();
        }
        w.end_array().end_object();
        return w.take();
    });
}

// {"tokens": [ids]} -> {"content": text}; ids outside the vocabulary -> 400.
void handle_detokenize(DaemonContext& ctx, HttpRequest& request, std::shared_ptr<ResponseWriter> writer) {
    answer_off_loop(ctx, request, writer, [](simdjson::dom::object root, const core::Tokenizer& tok) {
        element e;
        if (root["tokens"].get(e) || !e.is_array()) fail("tokens", "'tokens' must be an array of token ids", "");
        std::vector<int32_t> ids;
        for (element id : e.get_array()) {
            int64_t v = integer_of(id, "tokens");
            if (v < 0 || size_t(v) >= tok.n_ids()) fail("tokens", "token id " + std::to_string(v) + " is not in the vocabulary", "");
            ids.push_back(int32_t(v));
        }
        core::JsonWriter w;
        w.begin_object().member("content", tok.decode(ids)).end_object();
        return w.take();
    });
}

} // namespace ninfer::daemon
