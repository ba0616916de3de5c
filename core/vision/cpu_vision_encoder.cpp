// ninfer::core - CpuVisionEncoder: a VisionTower and its own thread pool behind VisionEncoder.
#include "core/vision/cpu_vision_encoder.h"

#include "core/cpu/thread_pool.h"
#include "core/vision/vision_tower.h"

namespace ninfer::core {
namespace {

class CpuVisionEncoder final : public VisionEncoder {
  public:
    CpuVisionEncoder(const VisionWeights& w, unsigned threads) : pool_(threads), tower_(w, pool_) {}
    uint32_t out_hidden() const override { return tower_.out_hidden(); }
    std::vector<float> encode(const VisionInput& item) override { return tower_.encode(item); }

  private:
    ThreadPool pool_;
    VisionTower tower_;
};

} // namespace

std::unique_ptr<VisionEncoder> make_cpu_vision_encoder(const VisionWeights& weights, unsigned threads,
                                                       int32_t image_token_id, int32_t video_token_id) {
    auto e = std::make_unique<CpuVisionEncoder>(weights, threads);
    e->image_token_id = image_token_id;
    e->video_token_id = video_token_id;
    return e;
}

} // namespace ninfer::core
