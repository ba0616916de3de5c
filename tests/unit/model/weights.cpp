// ninfer tests - the weights binder: shapes, exact coverage, fused pieces, stored formats.
#include "core/cpu/matmul.h"
#include "core/formats/codec.h"
#include "core/model/random_model.h"
#include "core/model/weights.h"
#include "core/util/error.h"
#include "tests/unit/cpu/tiny_models.h"

#include <catch2/catch.hpp>

using namespace ninfer::core;
using namespace ninfer::test;

TEST_CASE("weights: every parameter the config implies is bound with its shape", "[weights]") {
    for (bool moe : {false, true}) {
        const ModelConfig c = tiny_config(moe);
        auto model = InMemoryModel::random(c);
        const ModelWeights w = model->weights();
        CHECK(w.layers.size() == c.num_hidden_layers);
        CHECK(w.token_embedding.rows() == c.vocab_size);
        CHECK(w.layers[1].kind == LayerKind::FullAttention);
        CHECK(w.layers[1].attention.query.rows() == c.attn_q_dim());
        CHECK(w.layers[0].gdn.value.rows() == c.gdn_value_dim());
        CHECK(w.layers[0].gdn.convolution.size() == size_t(c.linear_conv_kernel_dim) * c.gdn_conv_dim());
        CHECK(model->bindings().size() == text_parameter_specs(c).size());
        if (moe) {
            CHECK(w.layers[2].moe.experts.size() == c.num_experts);
            CHECK(w.layers[2].moe.shared_score.rows() == 1);
        }
        CHECK(w.stored_bytes() > 0);
    }
}

TEST_CASE("weights: a missing or misshapen parameter is refused by name", "[weights]") {
    const ModelConfig c = tiny_config(false);
    auto model = InMemoryModel::random(c);
    auto bindings = model->bindings();
    bindings.erase("text/layers/3/gdn/dt_bias");
    CHECK_THROWS_WITH(ModelWeights::from_bindings(c, bindings),
                      Catch::Contains("missing parameter text/layers/3/gdn/dt_bias"));
    bindings = model->bindings();
    bindings["text/layers/1/attention/key"].shape = {c.attn_kv_dim() + 1, c.hidden_size};
    CHECK_THROWS_WITH(ModelWeights::from_bindings(c, bindings),
                      Catch::Contains("text/layers/1/attention/key: shape"));
    bindings = model->bindings();
    auto& piece = bindings["text/final_norm"].pieces[0];
    piece.elem_end -= 1;
    CHECK_THROWS_WITH(ModelWeights::from_bindings(c, bindings), Catch::Contains("pieces cover"));
}

TEST_CASE("weights: fused parents bound through row pieces equal separate tensors", "[weights]") {
    const ModelConfig c = tiny_config(false);
    auto plain = InMemoryModel::random(c, {.seed = 4});
    auto fused = InMemoryModel::random(c, {.seed = 4, .fuse = true});
    CHECK(fused->bindings().at("text/layers/1/attention/key").pieces[0].elem_begin > 0);
    const ModelWeights a = plain->weights(), b = fused->weights();
    const Matrix& ma = a.layers[1].attention.value;
    const Matrix& mb = b.layers[1].attention.value;
    std::vector<float> ra(ma.rows() * ma.cols()), rb(ra.size());
    ma.decode(0, ma.rows(), ra.data());
    mb.decode(0, mb.rows(), rb.data());
    CHECK(ra == rb);
}

TEST_CASE("weights: matmul over every stored format matches the decoded matrix", "[weights]") {
    for (TensorFormat f : {TensorFormat::Bf16, TensorFormat::Q8G32Fp16, TensorFormat::Q4G64Fp16,
                           TensorFormat::Fp8E4m3fnRowBf16}) {
        const ModelConfig c = tiny_config(false);
        auto model = InMemoryModel::random(c, {.seed = 6, .matrix_format = f, .fuse = true});
        const ModelWeights w = model->weights();
        const Matrix& m = w.layers[0].gdn.z; // a piece in the middle of a fused parent
        std::vector<float> dense(m.rows() * m.cols());
        m.decode(0, m.rows(), dense.data());
        const auto x = random_tokens(3 * m.cols(), 1000, 2);
        std::vector<float> xs(x.begin(), x.end());
        for (float& v : xs) v = v / 500.0f - 1.0f;
        ThreadPool pool(2);
        for (size_t n_tokens : {1u, 3u}) {
            std::vector<float> y(n_tokens * m.rows());
            cpu::matmul(pool, m, xs.data(), n_tokens, y.data());
            for (size_t t = 0; t < n_tokens; ++t)
                for (size_t r = 0; r < m.rows(); ++r) {
                    double want = 0;
                    for (size_t k = 0; k < m.cols(); ++k)
                        want += double(dense[r * m.cols() + k]) * xs[t * m.cols() + k];
                    CHECK(y[t * m.rows() + r] == Approx(want).margin(1e-4));
                }
        }
    }
}
