// ninfer::ctl - `ninferctl run`: one generation from a prompt on the local backend.
#include "ctl/command_list.h"
#include "ctl/model_session.h"
#include "ctl/run_speculative.h"

#include "core/frontend/chat_messages.h"
#include "core/frontend/chat_template.h"
#include "core/engine/grammar_constraint.h"
#include "core/frontend/detokenizer.h"
#include "core/model/kv_codec.h"
#ifdef NINFER_HAVE_MEDIA
#include "core/media/media_request.h"
#include "core/media/placeholders.h"
#endif
#include "core/util/error.h"
#include "core/util/regular_file.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace ninfer::ctl {

namespace {

constexpr const char* kRunUsage =
    "usage: ninferctl run ARTIFACT (--prompt TEXT | --messages FILE | --prompt-ids 1,2,3) [--raw]\n"
    "           [--max-new N (256)] [--greedy] [--temperature T] [--top-p P] [--top-k K] [--min-p M]\n"
    "           [--seed S] [--no-thinking] [--ignore-eos] [--print-token-ids] [--device cpu|cuda]\n"
    "           [--kv-dtype bf16|fp8|int8|f32] [--speculative off|mtp:K|ngram:K] [--stats]\n"
    "           [--json-schema FILE | --grammar FILE]\n"
    "  --prompt is wrapped in the chat template as one user turn unless --raw; --messages takes\n"
    "  {\"messages\": [...], \"tools\": [...]} (image_url / video_url parts: data: or file:// URLs,\n"
    "  decoded like ninferd does, for an artifact with a vision tower); --prompt-ids bypasses template\n"
    "  and tokenizer.\n"
    "  stdout: the generated text, or with --print-token-ids the generated ids on one line.\n"
    "  Sampling defaults come from the artifact's generation_config.json, else temperature 1 and top-p 1,\n  as ninferd applies them to requests; --greedy is argmax.\n"
    "  --speculative drafts K (1..5) tokens a round with the artifact's MTP head or n-gram prompt lookup and\n"
    "  verifies them in one step (exact: greedy output is unchanged; CPU and CUDA backends); --stats prints\n"
    "  the rounds, drafted and accepted tokens and tokens per round on stderr.\n"
    "  --json-schema / --grammar (llama.cpp GBNF) constrain the reply as ninferd's response_format and\n"
    "  grammar do: after </think> in thinking mode, from the first token with --no-thinking, --raw or\n"
    "  --prompt-ids; the end token comes only once the grammar accepts (docs/GRAMMAR.md).\n";

struct RunArgs {
    std::string artifact, prompt, messages_file, prompt_ids;
    bool has_prompt = false, raw = false, greedy = false, no_thinking = false;
    bool ignore_eos = false, print_ids = false;
    uint32_t max_new = 256;
    std::optional<float> temperature, top_p, min_p;
    std::optional<int32_t> top_k;
    std::optional<uint64_t> seed;
    std::string device, kv_dtype = "bf16";
    core::SpeculativeConfig speculative;
    bool stats = false;
    std::string json_schema_file, grammar_file;
};

float parse_float(const char* option, const char* text) {
    char* end = nullptr;
    const float v = std::strtof(text, &end);
    if (!*text || *end)
        throw Error(std::string(option) + ": not a number: '" + text + "'");
    return v;
}

std::vector<int32_t> parse_ids(const std::string& text) {
    std::vector<int32_t> ids;
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, ','))
        ids.push_back(int32_t(parse_count("--prompt-ids", item.c_str())));
    if (ids.empty())
        throw Error("--prompt-ids: no ids");
    return ids;
}

// Returns false on a usage error.
bool parse_args(int argc, char** argv, RunArgs& a) {
    for (int i = 0; i < argc; ++i) {
        const std::string arg = argv[i];
        auto value = [&]() -> const char* {
            if (i + 1 >= argc)
                throw Error(arg + ": missing value");
            return argv[++i];
        };
        if (arg == "--prompt") { a.prompt = value(); a.has_prompt = true; }
        else if (arg == "--messages") a.messages_file = value();
        else if (arg == "--prompt-ids") a.prompt_ids = value();
        else if (arg == "--raw") a.raw = true;
        else if (arg == "--max-new") a.max_new = uint32_t(parse_count("--max-new", value()));
        else if (arg == "--greedy") a.greedy = true;
        else if (arg == "--temperature") a.temperature = parse_float("--temperature", value());
        else if (arg == "--top-p") a.top_p = parse_float("--top-p", value());
        else if (arg == "--top-k") a.top_k = int32_t(parse_count("--top-k", value()));
        else if (arg == "--min-p") a.min_p = parse_float("--min-p", value());
        else if (arg == "--seed") a.seed = parse_count("--seed", value());
        else if (arg == "--no-thinking") a.no_thinking = true;
        else if (arg == "--ignore-eos") a.ignore_eos = true;
        else if (arg == "--print-token-ids") a.print_ids = true;
        else if (arg == "--device") a.device = value();
        else if (arg == "--kv-dtype") a.kv_dtype = value();
        else if (arg == "--speculative") a.speculative = core::parse_speculative(value());
        else if (arg == "--stats") a.stats = true;
        else if (arg == "--json-schema") a.json_schema_file = value();
        else if (arg == "--grammar") a.grammar_file = value();
        else if (a.artifact.empty() && !arg.empty() && arg[0] != '-') a.artifact = arg;
        else return false;
    }
    const int sources = int(a.has_prompt) + int(!a.messages_file.empty()) + int(!a.prompt_ids.empty());
    return !a.artifact.empty() && sources == 1 && (a.json_schema_file.empty() || a.grammar_file.empty());
}

// The constraint of --json-schema / --grammar (nullopt without them), compiled here.
std::optional<core::ConstraintSpec> constraint_of(const RunArgs& a, const ModelSession& s,
                                                  const std::vector<int32_t>& stop_ids) {
    if (a.json_schema_file.empty() && a.grammar_file.empty()) return std::nullopt;
    if (!s.tokenizer) throw Error("run: --json-schema and --grammar need the artifact's tokenizer");
    const bool schema = !a.json_schema_file.empty();
    const std::string text = core::read_input_file(schema ? a.json_schema_file : a.grammar_file,
                                                   schema ? "run: --json-schema" : "run: --grammar");
    auto grammar = schema ? core::grammar::Grammar::from_json_schema(text) : core::grammar::Grammar::from_gbnf(text);
    const bool thinking = !a.no_thinking && !a.raw && a.prompt_ids.empty();
    return core::grammar_constraint_spec(std::move(grammar), core::grammar::TokenIndex::from_tokenizer(*s.tokenizer, stop_ids),
                                         core::reply_shape(*s.tokenizer, thinking, stop_ids));
}

struct RunPrompt {
    std::vector<int32_t> tokens;
    std::vector<core::VisionInput> media; // --messages with image_url / video_url parts
};

// A conversation's images and videos, decoded as ninferd decodes them (its default limits; any
// local file may be named: it is the user's own shell).
std::vector<core::VisionInput> conversation_media(const core::ChatConversation& conversation, const ModelSession& s) {
#ifdef NINFER_HAVE_MEDIA
    const std::vector<core::MediaSource> sources = core::media_sources(conversation);
    if (sources.empty()) return {};
    if (!s.artifact->has_component("vision"))
        throw Error("run: --messages holds images or video, and the artifact has no vision tower");
    core::MediaPool pool(2);
    return core::decode_request_media(sources, core::media_config_of(*s.artifact), core::MediaLimits{}, "/", pool);
#else
    (void)s;
    for (const core::ChatMessage& m : conversation.messages)
        for (const core::ContentPart& p : m.content)
            if (p.kind != core::ContentPart::Kind::Text)
                throw Error("run: this ninferctl was built without FFmpeg's headers and cannot decode images or video");
    return {};
#endif
}

RunPrompt prompt_tokens(const RunArgs& a, const ModelSession& s) {
    if (!a.prompt_ids.empty())
        return {parse_ids(a.prompt_ids), {}};
    if (!s.tokenizer)
        throw Error("run: the artifact carries no tokenizer.json; use --prompt-ids");
    std::string text;
    RunPrompt out;
    if (a.has_prompt && a.raw) {
        text = a.prompt;
    } else {
        core::ChatConversation conversation;
        if (a.has_prompt)
            conversation.messages.push_back(core::ChatMessage::text(core::ChatRole::User, a.prompt));
        else
            conversation = core::parse_chat_conversation_json(core::read_input_file(a.messages_file, "run: --messages"));
        core::ChatRenderOptions options;
        options.enable_thinking = !a.no_thinking;
        text = core::render_chat_prompt(conversation, options);
        out.media = conversation_media(conversation, s);
#ifdef NINFER_HAVE_MEDIA
        if (!out.media.empty()) text = core::expand_vision_placeholders(text, out.media);
#endif
    }
    out.tokens = s.tokenizer->encode(text);
    return out;
}

// The flags over the artifact's generation_config.json over OpenAI's neutral values: the rule
// ninferd applies to a request that sets the same fields (core/backend/generation_config.h).
core::SamplingParams sampling_params(const RunArgs& a, const core::GenerationConfig& g) {
    core::SamplingDefaults flags;
    flags.temperature = a.greedy ? std::optional<float>(0.0f) : a.temperature;
    flags.top_p = a.top_p;
    flags.top_k = a.top_k;
    flags.min_p = a.min_p;
    if (a.seed) flags.seed = *a.seed;
    core::SamplingParams p = core::resolve_sampling(g.sampling, {}, flags);
    if (!flags.seed && !g.sampling.seed) p.seed = std::random_device{}();
    return p;
}

void print_output(core::Detokenizer* detok, const std::vector<int32_t>& generated, bool print_ids) {
    if (detok) {
        const std::string rest = detok->finish();
        std::fwrite(rest.data(), 1, rest.size(), stdout);
        std::fputc('\n', stdout);
        return;
    }
    if (!print_ids)
        std::fprintf(stderr, "run: the artifact has no tokenizer; printing token ids\n");
    for (size_t i = 0; i < generated.size(); ++i)
        std::printf("%s%d", i ? " " : "", generated[i]);
    std::printf("\n");
}

// The first token comes from the prefill's logits; decode steps produced the rest.
void print_times(size_t prompt_n, double prefill_s, size_t generated_n, double decode_s) {
    const size_t decoded = generated_n ? generated_n - 1 : 0;
    std::fprintf(stderr, "prefill: %zu tokens in %.3f s (%.1f tok/s); decode: %zu tokens in %.3f s (%.1f tok/s)\n",
                 prompt_n, prefill_s, double(prompt_n) / std::max(prefill_s, 1e-9), decoded, decode_s,
                 double(decoded) / std::max(decode_s, 1e-9));
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace

int cmd_run(int argc, char** argv) {
    RunArgs a;
    if (!parse_args(argc, argv, a)) {
        std::fputs(kRunUsage, stderr);
        return 2;
    }
    check_device(a.device);
    core::kv_dtype_from_name(a.kv_dtype);
    auto session = open_model_session(a.artifact);
    const RunPrompt run_prompt = prompt_tokens(a, *session);
    const std::vector<int32_t>& prompt = run_prompt.tokens;
    if (!run_prompt.media.empty() && a.speculative.on())
        throw Error("run: --speculative with images or video is not supported (drop --speculative)");
    BackendOptions bo;
    bo.device = a.device;
    bo.kv_dtype = core::kv_dtype_from_name(a.kv_dtype);
    bo.max_context = uint32_t(std::min<uint64_t>(prompt.size() + uint64_t(a.max_new), UINT32_MAX));
    if (a.speculative.on()) {
        if (a.speculative.kind == core::SpeculativeKind::Mtp && !session->weights.mtp)
            throw Error("run: --speculative " + core::speculative_name(a.speculative) + " needs the artifact's MTP head, and " +
                        a.artifact + " has none (use ngram:K)");
        bo.max_draft_tokens = uint32_t(a.speculative.k);
        bo.mtp = a.speculative.kind == core::SpeculativeKind::Mtp;
    }
    start_backend(*session, bo);
    if (prompt.size() + 1 > session->plan.max_context)
        throw Error("run: the prompt (" + std::to_string(prompt.size()) +
                    " tokens) does not fit the model's context of " +
                    std::to_string(session->plan.max_context));
    core::Backend& backend = *session->backend;
    core::SamplingParams params = sampling_params(a, session->generation);
    std::vector<int32_t> stop_ids;
    if (!a.ignore_eos)
        stop_ids = session->generation.stop_ids;

    std::unique_ptr<core::Detokenizer> detok;
    if (session->tokenizer && !a.print_ids)
        detok = std::make_unique<core::Detokenizer>(*session->tokenizer, true);
    std::vector<int32_t> generated;
    // Keeps a token and prints its text (a stop token has none); true for a stop token.
    auto emit = [&](int32_t token) {
        generated.push_back(token);
        const bool stop = std::find(stop_ids.begin(), stop_ids.end(), token) != stop_ids.end();
        if (detok && !stop) {
            const std::string piece = detok->push(token);
            std::fwrite(piece.data(), 1, piece.size(), stdout);
            std::fflush(stdout);
        }
        return stop;
    };
    std::optional<core::ConstraintSpec> constraint =
        constraint_of(a, *session, a.ignore_eos ? session->generation.stop_ids : stop_ids);
    if (a.speculative.on() || constraint) { // through the scheduler: speculative rounds, grammar masks
        core::GenerationRequest r;
        r.sampling = params;
        r.max_tokens = a.max_new;
        r.stop_token_ids = stop_ids;
        r.speculative = a.speculative;
        r.constraint = std::move(constraint);
        const SpeculativeRun run =
            run_speculative(backend, session->plan, prompt, std::move(r), [&](int32_t token) { emit(token); });
        print_output(detok.get(), generated, a.print_ids);
        if (run.summary.reason == core::FinishReason::ConstraintFailed)
            throw Error("run: the grammar allowed no next token the model's vocabulary holds (the reply is incomplete)");
        print_times(prompt.size(), run.summary.prompt_ms / 1e3, generated.size(), run.summary.decode_ms / 1e3);
        if (a.stats) std::fprintf(stderr, "%s\n", speculative_stats_line(a.speculative, run).c_str());
        return 0;
    }

    auto t0 = std::chrono::steady_clock::now();
    prefill_prompt(*session, prompt, run_prompt.media);
    const double prefill_s = seconds_since(t0);

    t0 = std::chrono::steady_clock::now();
    int32_t token = 0;
    for (uint32_t step = 0; step < a.max_new; ++step) {
        params.step = step;
        if (step == 0) {
            token = backend.sample_after_prefill(0, params, generated, 0).token;
        } else {
            core::DecodeStep d;
            d.lane = 0;
            d.token = token;
            d.sampling = params;
            d.generated = generated;
            token = backend.decode(std::span(&d, 1))[0].token;
        }
        if (emit(token))
            break;
        if (backend.lane_length(0) + 1 > backend.max_context())
            break;
    }
    print_output(detok.get(), generated, a.print_ids);
    print_times(prompt.size(), prefill_s, generated.size(), seconds_since(t0));
    if (a.stats) std::fprintf(stderr, "speculative off\n");
    return 0;
}

} // namespace ninfer::ctl
