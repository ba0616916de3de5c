// ninfer::core - the v1/v2 inventories of the 27B and 35B-A3B and their v3 bindings/uses
// (docs/ARTIFACT_FORMAT.md §4.1, §4.3).
#include "core/artifact/upgrade_inventory.h"

#include "core/util/error.h"

#include <map>

namespace ninfer::core {
namespace {

using F = TensorFormat;
constexpr uint64_t kVocab = 248320, kDraftRows = 131072;

struct Arch {
    bool moe;
    uint64_t hidden, n_layers, n_q, n_kv, n_v; // attention heads, KV heads, GDN value heads
};

Arch arch_of(const std::string& model_id) {
    if (model_id == "qwen3.6-27b") return {false, 5120, 64, 24, 4, 48};
    if (model_id == "qwen3.6-35b-a3b") return {true, 2048, 40, 16, 2, 32};
    throw Error("artifact upgrade: no published groupwise-int inventory for model '" + model_id +
                "' (known: qwen3.6-27b, qwen3.6-35b-a3b)");
}

class Inventory {
  public:
    std::vector<LegacyObject> out;
    void t(const std::string& name, std::vector<uint64_t> shape, F f) { out.push_back({name, true, std::move(shape), f}); }
    void r(const std::string& name) { out.push_back({name, false, {}, F::Bf16}); }
};

void add_moe(Inventory& inv, const std::string& p, uint64_t h, F routed_up, F routed_down, F shared) {
    inv.t(p + "moe/router_shared_gate", {257, h}, F::Bf16);
    inv.t(p + "moe/routed_gate_up", {262144, h}, routed_up);
    inv.t(p + "moe/routed_down", {524288, 512}, routed_down);
    inv.t(p + "moe/shared_gate_up", {1024, h}, shared);
    inv.t(p + "moe/shared_down", {h, 512}, shared);
}

void add_vision(Inventory& inv, uint64_t out_hidden) {
    inv.t("vision/patch_embedding", {1152, 1536}, F::Q6G64Fp16);
    inv.t("vision/patch_embedding_bias", {1152}, F::Bf16);
    inv.t("vision/position_embedding", {2304, 1152}, F::Bf16);
    for (int b = 0; b < 27; ++b) {
        std::string p = "vision/blocks/" + std::to_string(b) + "/";
        inv.t(p + "attention/qkv", {3456, 1152}, F::Q4G64Fp16);
        inv.t(p + "attention/qkv_bias", {3456}, F::Bf16);
        inv.t(p + "attention/output", {1152, 1152}, F::Q5G64Fp16);
        inv.t(p + "attention/output_bias", {1152}, F::Bf16);
        inv.t(p + "mlp/fc1", {4304, 1152}, F::Q4G64Fp16);
        inv.t(p + "mlp/fc1_bias", {4304}, F::Bf16);
        inv.t(p + "mlp/fc2", {1152, 4304}, F::Q5G64Fp16);
        inv.t(p + "mlp/fc2_bias", {1152}, F::Bf16);
        for (const char* n : {"norm1/weight", "norm1/bias", "norm2/weight", "norm2/bias"}) inv.t(p + n, {1152}, F::Bf16);
    }
    inv.t("vision/merger/fc1", {4608, 4608}, F::Q8G32Fp16);
    inv.t("vision/merger/fc1_bias", {4608}, F::Bf16);
    inv.t("vision/merger/fc2", {out_hidden, 4608}, F::Q8G32Fp16);
    inv.t("vision/merger/fc2_bias", {out_hidden}, F::Bf16);
    inv.t("vision/merger/norm/weight", {1152}, F::Bf16);
    inv.t("vision/merger/norm/bias", {1152}, F::Bf16);
}

// Parameters of a fused parent: consecutive row blocks (sizes in rows) of a [N, K] object.
void rows(std::vector<PlannedBinding>& out, const LegacyObject& o, const std::vector<std::pair<std::string, uint64_t>>& blocks) {
    uint64_t k = o.shape.at(1), at = 0;
    for (const auto& [param, n] : blocks) {
        out.push_back({param, {{o.name, at * k, (at + n) * k}}, false});
        at += n;
    }
    if (at != o.shape[0]) throw Error("artifact upgrade: row blocks of " + o.name + " do not cover it");
}

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

} // namespace

std::vector<LegacyObject> legacy_inventory(const std::string& model_id) {
    Arch a = arch_of(model_id);
    const uint64_t h = a.hidden;
    Inventory inv;
    for (const char* r : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json",
                          "preprocessor_config.json", "video_preprocessor_config.json"})
        inv.r(std::string("frontend/") + r);
    inv.t("text/token_embedding", {kVocab, h}, a.moe ? F::Q8G32Fp16 : F::Q6G64Fp16);
    const uint64_t attn_rows = (a.n_q + a.n_kv) * 256, v_rows = a.n_v * 128;
    for (uint64_t l = 0; l < a.n_layers; ++l) {
        std::string p = "text/layers/" + std::to_string(l) + "/";
        inv.t(p + "input_norm", {h}, F::Bf16);
        if (l % 4 == 3) {
            if (a.moe) {
                inv.t(p + "attention/query_key_gate_value", {2 * attn_rows, h}, F::Q8G32Fp16);
            } else {
                inv.t(p + "attention/query_key", {attn_rows, h}, F::Q4G64Fp16);
                inv.t(p + "attention/gate_value", {attn_rows, h}, F::Q5G64Fp16);
            }
            inv.t(p + "attention/query_norm", {256}, F::Bf16);
            inv.t(p + "attention/key_norm", {256}, F::Bf16);
            inv.t(p + "attention/output", {h, a.n_q * 256}, a.moe ? F::Q8G32Fp16 : F::Q5G64Fp16);
        } else {
            inv.t(p + "gdn/a_log", {a.n_v}, F::Fp32);
            inv.t(p + "gdn/dt_bias", {a.n_v}, F::Fp32);
            inv.t(p + "gdn/convolution", {4, 4096 + v_rows}, F::Bf16);
            if (a.moe) {
                inv.t(p + "gdn/a_b_projection", {2 * a.n_v, h}, F::Bf16);
                inv.t(p + "gdn/query_key_value_z", {4096 + 2 * v_rows, h}, F::Q8G32Fp16);
            } else {
                inv.t(p + "gdn/a_projection", {a.n_v, h}, F::Bf16);
                inv.t(p + "gdn/b_projection", {a.n_v, h}, F::Bf16);
                inv.t(p + "gdn/query_key", {4096, h}, F::Q4G64Fp16);
                inv.t(p + "gdn/value_z", {2 * v_rows, h}, F::Q5G64Fp16);
            }
            inv.t(p + "gdn/norm", {128}, F::Bf16);
            inv.t(p + "gdn/output", {h, v_rows}, a.moe ? F::Q8G32Fp16 : F::Q5G64Fp16);
        }
        inv.t(p + "post_attention_norm", {h}, F::Bf16);
        if (a.moe) {
            bool q6 = l == 34 || l == 38 || l == 39;
            add_moe(inv, p, h, F::Q4G64Fp16, q6 ? F::Q6G64Fp16 : F::Q5G64Fp16, F::Q8G32Fp16);
        } else {
            inv.t(p + "mlp/gate_up", {34816, h}, F::Q4G64Fp16);
            inv.t(p + "mlp/down", {h, 17408}, F::Q5G64Fp16);
        }
    }
    inv.t("text/final_norm", {h}, F::Bf16);
    inv.t("text/output_head", {kVocab, h}, F::Q6G64Fp16);
    inv.t("text/draft_head", {kDraftRows, h}, F::Q4G64Fp16);
    inv.t("text/draft_head_token_ids", {kDraftRows}, F::Int32);
    inv.t("mtp/input_projection", {h, 2 * h}, F::Q8G32Fp16);
    inv.t("mtp/embedding_norm", {h}, F::Bf16);
    inv.t("mtp/hidden_norm", {h}, F::Bf16);
    inv.t("mtp/layer/input_norm", {h}, F::Bf16);
    inv.t("mtp/layer/attention/query_key_gate_value", {2 * attn_rows, h}, F::Q8G32Fp16);
    inv.t("mtp/layer/attention/query_norm", {256}, F::Bf16);
    inv.t("mtp/layer/attention/key_norm", {256}, F::Bf16);
    inv.t("mtp/layer/attention/output", {h, a.n_q * 256}, F::Q8G32Fp16);
    inv.t("mtp/layer/post_attention_norm", {h}, F::Bf16);
    if (a.moe) {
        add_moe(inv, "mtp/layer/", h, F::Q8G32Fp16, F::Q8G32Fp16, F::Q8G32Fp16);
    } else {
        inv.t("mtp/layer/mlp/gate_up", {34816, h}, F::Q8G32Fp16);
        inv.t("mtp/layer/mlp/down", {h, 17408}, F::Q8G32Fp16);
    }
    inv.t("mtp/final_norm", {h}, F::Bf16);
    add_vision(inv, h);
    if (a.moe) {
        inv.t("dflash/feature_projection", {h, 16384}, F::Q8G32Fp16);
        inv.t("dflash/context_norm", {h}, F::Bf16);
        for (int l = 0; l < 6; ++l) {
            std::string p = "dflash/layers/" + std::to_string(l) + "/";
            inv.t(p + "input_norm", {h}, F::Bf16);
            inv.t(p + "attention/query_key_value", {6144, h}, F::Q8G32Fp16);
            inv.t(p + "attention/query_norm", {128}, F::Bf16);
            inv.t(p + "attention/key_norm", {128}, F::Bf16);
            inv.t(p + "attention/output", {h, 4096}, F::Q8G32Fp16);
            inv.t(p + "post_attention_norm", {h}, F::Bf16);
            inv.t(p + "mlp/gate_up", {12288, h}, F::Q8G32Fp16);
            inv.t(p + "mlp/down", {h, 6144}, F::Q8G32Fp16);
        }
        inv.t("dflash/final_norm", {h}, F::Bf16);
    }
    return inv.out;
}

std::vector<PlannedBinding> plan_bindings(const std::string& model_id, const std::vector<LegacyObject>& objects) {
    Arch a = arch_of(model_id);
    const uint64_t q = a.n_q * 256, kv = a.n_kv * 256, v = a.n_v * 128;
    std::vector<PlannedBinding> out;
    for (const LegacyObject& o : objects) {
        if (!o.is_tensor) continue;
        std::string n = o.name;
        // Renamed prefixes (docs/ARTIFACT_FORMAT.md §4.3): mtp/layer/ -> mtp/layers/0/,
        // vision/blocks/ -> vision/layers/.
        std::string p = n;
        if (p.rfind("mtp/layer/", 0) == 0) p = "mtp/layers/0/" + p.substr(10);
        if (p.rfind("vision/blocks/", 0) == 0) p = "vision/layers/" + p.substr(14);
        std::string base = p.substr(0, p.rfind('/') + 1);
        auto whole = [&](const std::string& param) { out.push_back({param, {{n, 0, 0}}, true}); };
        if (n == "text/draft_head") whole("proposal/head");
        else if (n == "text/draft_head_token_ids") whole("proposal/token_ids");
        else if (ends_with(p, "attention/query_key")) rows(out, o, {{base + "query", q}, {base + "key", kv}});
        else if (ends_with(p, "attention/gate_value")) rows(out, o, {{base + "gate", q}, {base + "value", kv}});
        else if (ends_with(p, "attention/query_key_gate_value"))
            rows(out, o, {{base + "query", q}, {base + "key", kv}, {base + "gate", q}, {base + "value", kv}});
        else if (ends_with(p, "attention/query_key_value")) { // dflash: key/value also feed the context
            rows(out, o, {{base + "query", 4096}, {base + "key", 1024}, {base + "value", 1024}});
            rows(out, o, {{base + "query", 4096}, {base + "context_key", 1024}, {base + "context_value", 1024}});
            out.erase(out.end() - 3); // the second query
        } else if (ends_with(p, "gdn/query_key")) rows(out, o, {{base + "query", 2048}, {base + "key", 2048}});
        else if (ends_with(p, "gdn/value_z")) rows(out, o, {{base + "value", v}, {base + "z", v}});
        else if (ends_with(p, "gdn/query_key_value_z"))
            rows(out, o, {{base + "query", 2048}, {base + "key", 2048}, {base + "value", v}, {base + "z", v}});
        else if (ends_with(p, "gdn/a_b_projection")) rows(out, o, {{base + "a_projection", a.n_v}, {base + "b_projection", a.n_v}});
        else if (ends_with(p, "mlp/gate_up")) rows(out, o, {{base + "gate", o.shape[0] / 2}, {base + "up", o.shape[0] / 2}});
        else if (ends_with(p, "moe/router_shared_gate")) rows(out, o, {{base + "router", 256}, {base + "shared_score", 1}});
        else if (ends_with(p, "moe/shared_gate_up")) rows(out, o, {{base + "shared/gate", 512}, {base + "shared/up", 512}});
        else if (ends_with(p, "moe/shared_down")) whole(base + "shared/down");
        else if (ends_with(p, "moe/routed_gate_up")) {
            for (int e = 0; e < 256; ++e) {
                std::string ep = base + "experts/" + std::to_string(e) + "/";
                uint64_t r0 = uint64_t(e) * 1024;
                out.push_back({ep + "gate", {{n, r0 * o.shape[1], (r0 + 512) * o.shape[1]}}, false});
                out.push_back({ep + "up", {{n, (r0 + 512) * o.shape[1], (r0 + 1024) * o.shape[1]}}, false});
            }
        } else if (ends_with(p, "moe/routed_down")) {
            for (int e = 0; e < 256; ++e) {
                uint64_t r0 = uint64_t(e) * a.hidden;
                out.push_back({base + "experts/" + std::to_string(e) + "/down",
                               {{n, r0 * o.shape[1], (r0 + a.hidden) * o.shape[1]}}, false});
            }
        } else if (ends_with(p, "attention/qkv")) rows(out, o, {{base + "query", 1152}, {base + "key", 1152}, {base + "value", 1152}});
        else if (ends_with(p, "attention/qkv_bias")) {
            for (int i = 0; i < 3; ++i)
                out.push_back({base + (i == 0 ? "query_bias" : i == 1 ? "key_bias" : "value_bias"),
                               {{n, uint64_t(i) * 1152, uint64_t(i + 1) * 1152}}, false});
        } else if (ends_with(p, "norm1/weight") || ends_with(p, "norm1/bias") || ends_with(p, "norm2/weight") ||
                   ends_with(p, "norm2/bias") || ends_with(p, "merger/norm/weight") || ends_with(p, "merger/norm/bias")) {
            std::string parent = p.substr(0, p.rfind('/'));
            whole(parent + "_" + p.substr(p.rfind('/') + 1)); // norm1/weight -> norm1_weight
        } else whole(p);
    }
    return out;
}

std::vector<PlannedUse> plan_uses(const std::string& model_id, const std::vector<PlannedBinding>& bindings) {
    Arch a = arch_of(model_id);
    std::vector<std::string> drafts = {"mtp"};
    if (a.moe) drafts.push_back("dflash");
    std::vector<PlannedUse> out;
    for (const PlannedBinding& b : bindings) {
        const std::string& p = b.parameter;
        std::string last = p.substr(p.rfind('/') + 1);
        std::string dir = p.substr(0, p.rfind('/') + 1);
        auto use = [&](const std::string& input) { out.push_back({p, input}); };
        bool vision = p.rfind("vision/", 0) == 0, dflash = p.rfind("dflash/", 0) == 0;
        if (p == "text/output_head") {
            use("text/final_hidden");
            for (const std::string& d : drafts) use(d + "/final_hidden");
        } else if (p == "proposal/head") {
            for (const std::string& d : drafts) use(d + "/final_hidden");
        } else if (p == "mtp/input_projection") use("mtp/stem_input");
        else if (p == "vision/patch_embedding") use("vision/patch_input");
        else if (p == "vision/merger/fc1") use("vision/merger/input");
        else if (p == "vision/merger/fc2") use("vision/merger/activation");
        else if (p == "dflash/feature_projection") use("dflash/target_features");
        else if (vision && dir.find("/attention/") != std::string::npos && (last == "query" || last == "key" || last == "value"))
            use(dir.substr(0, dir.size() - 10) + "attention_input");
        else if (vision && ends_with(p, "attention/output")) use(dir.substr(0, dir.size() - 10) + "attention_output");
        else if (vision && ends_with(p, "mlp/fc1")) use(dir.substr(0, dir.size() - 4) + "mlp_input");
        else if (vision && ends_with(p, "mlp/fc2")) use(dir.substr(0, dir.size() - 4) + "mlp_activation");
        else if (dflash && (last == "query" || last == "key" || last == "value"))
            use(dir.substr(0, dir.size() - 10) + "query_projection_input");
        else if (dflash && (last == "context_key" || last == "context_value")) use("dflash/context_input");
        else if (dflash && ends_with(p, "attention/output")) use(dir.substr(0, dir.size() - 10) + "attention_output");
        else if (dflash && (ends_with(p, "mlp/gate") || ends_with(p, "mlp/up"))) use(dir.substr(0, dir.size() - 4) + "mlp_input");
        else if (dflash && ends_with(p, "mlp/down")) use(dir.substr(0, dir.size() - 4) + "mlp_product");
        else if (vision || dflash || p.find("/layers/") == std::string::npos) continue; // norms, embeddings, biases
        else {
            std::string block = p.substr(0, p.find('/', p.find("/layers/") + 8) + 1); // text/layers/N/ or mtp/layers/0/
            std::string rest = p.substr(block.size());
            if (rest == "attention/query" || rest == "attention/key" || rest == "attention/gate" || rest == "attention/value" ||
                rest == "gdn/query" || rest == "gdn/key" || rest == "gdn/value" || rest == "gdn/z" ||
                rest == "gdn/a_projection" || rest == "gdn/b_projection")
                use(block + "mixer_input");
            else if (rest == "attention/output") use(block + "attention/gated_output");
            else if (rest == "gdn/output") use(block + "gdn/gated_output");
            else if (rest == "mlp/gate" || rest == "mlp/up" || rest == "moe/router" || rest == "moe/shared_score" ||
                     rest == "moe/shared/gate" || rest == "moe/shared/up" || ends_with(rest, "/gate") || ends_with(rest, "/up"))
                use(block + "ffn_input");
            else if (rest == "mlp/down") use(block + "mlp/product");
            else if (rest == "moe/shared/down") use(block + "moe/shared/product");
            else if (rest.rfind("moe/experts/", 0) == 0 && ends_with(rest, "/down"))
                use(block + rest.substr(0, rest.size() - 4) + "product");
        }
    }
    return out;
}

} // namespace ninfer::core
