// ninfer::core - the CUDA runner's description of a decode step's memory traffic for the L2
// prefetch window (l2_window.h).
#include "core/cuda/cuda_runner.h"

#include <cmath>

namespace ninfer::core::cuda {

// Launch order and bytes of the step, as enqueue_forward and enqueue_head issue them. Traffic that
// cannot be prefetched: K/V counted at max_context (the graph serves every depth), the GDN state
// read and written, the routed experts at the expected number of distinct experts of n tokens
// routed uniformly, E (1 - (1 - K/E)^n).
void Runner::describe_l2_step(int n) {
    const ModelConfig& c = config_;
    l2_.clear();
    auto use = [&](const DeviceLinear& w) {
        if (w.view.data)
            l2_.use(w.view.data, {{w.view.data, w.bytes}});
    };
    const uint64_t kv = uint64_t(n) * plan_.max_context * 2 * kv_page_bytes() / kKvPageTokens;
    const uint64_t gdn_state = uint64_t(n) * 2 * (recurrent_floats_per_lane() * 4 + conv_elems_per_lane() * 2);
    uint64_t experts = 0;
    if (c.is_moe() && !model_.layers.empty()) {
        const double E = double(c.num_experts), K = double(c.num_experts_per_tok);
        const DeviceMoe& m = model_.layers[0].moe;
        const double per_expert = double(m.experts_gate_up.bytes + m.experts_down.bytes) / E;
        experts = uint64_t(E * (1.0 - std::pow(1.0 - K / E, double(n))) * per_expert);
    }
    for (const DeviceLayer& L : model_.layers) {
        if (L.kind == LayerKind::FullAttention) {
            const DeviceAttention& a = L.attention;
            for (const DeviceLinear* w : {&a.fused, &a.query_gate, &a.query, &a.gate, &a.key, &a.value})
                use(*w);
            l2_.traffic(kv);
            use(a.output);
        } else {
            const DeviceGdn& g = L.gdn;
            for (const DeviceLinear* w : {&g.in_proj, &g.qkv, &g.query, &g.key, &g.value, &g.z, &g.a, &g.b})
                use(*w);
            l2_.traffic(gdn_state);
            use(g.output);
        }
        if (c.is_moe()) {
            const DeviceMoe& m = L.moe;
            std::vector<kernels::L2Range> parts;
            for (const DeviceLinear* w : {&m.router, &m.shared_score, &m.shared.gate_up, &m.shared.gate, &m.shared.up,
                                          &m.shared.down})
                parts.push_back({w->view.data, w->view.data ? w->bytes : 0});
            l2_.use(m.router.view.data, parts); // moe() forks before its first launch
            l2_.traffic(experts);
        } else {
            for (const DeviceLinear* w : {&L.mlp.gate_up, &L.mlp.gate, &L.mlp.up, &L.mlp.down})
                use(*w);
        }
    }
    use(model_.output_head);
    l2_.begin();
}

} // namespace ninfer::core::cuda
