// ninfer::core - CUDA lane state <-> LaneImage (the CPU backend's byte layout) in bulk copies,
// saves on a copier thread so a checkpoint does not stall the decode steps.
#include "core/cuda/lane_image.h"

#include "core/util/error.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstring>

namespace ninfer::core::cuda {

// One piece of an image's journey through a bounce buffer: KV rows of one layer's K or V pool for
// positions [pos0, pos0 + n_pos), or one GDN layer's conv history or recurrent state.
// MtpKv: the MTP layer's K/V rows (layer = its KV layer); MtpRows: pending hidden rows at `rows`.
struct LaneImageCopier::Chunk {
    enum class Kind : uint8_t { Kv, Conv, Recurrent, MtpKv, MtpRows } kind = Kind::Kv;
    uint32_t layer = 0; // full-attention layer (Kv, MtpKv) or GDN layer
    bool value = false; // Kv: V pool
    int pos0 = 0, n_pos = 0;
    uint64_t device_bytes = 0; // bytes on the GPU side (conv: bf16 or f32)
    uint64_t image_offset = 0; // into image.kv (Kv), image.gdn, or the MtpKv section
    float* rows = nullptr;     // MtpRows
    bool mtp() const { return kind == Kind::MtpKv || kind == Kind::MtpRows; }
    bool kv_rows() const { return kind == Kind::Kv || kind == Kind::MtpKv; }
};

namespace {

constexpr uint64_t kSlotPagesBytes = 64 << 10; // a save slot's page-table row (max_pages * 4)

kernels::KvRowGeometry kv_row_geometry(const Runner& run, const MemoryPlan& plan) {
    const ModelConfig& c = run.config();
    const kernels::KvDtype d = kernel_kv_dtype(plan.kv_dtype);
    const uint64_t code = d == kernels::KvDtype::Bf16 ? 2ull * c.head_dim : c.head_dim;
    const uint64_t scale = 2ull * uint64_t(kernels::kv_scales_per_row(d, int(c.head_dim)));
    if (code + scale != plan.kv_row_bytes)
        throw Error("cuda: KV rows of " + std::to_string(plan.kv_row_bytes) + " bytes in the plan, " +
                    std::to_string(code + scale) + " on the GPU");
    return {int(c.num_key_value_heads), int(code), int(scale), run.kv_page_bytes()};
}

void widen_bf16(const uint8_t* src, uint64_t n, float* out) {
    const __nv_bfloat16* in = reinterpret_cast<const __nv_bfloat16*>(src);
    for (uint64_t i = 0; i < n; ++i)
        out[i] = __bfloat162float(in[i]);
}

void round_to_bf16(const float* src, uint64_t n, uint8_t* dst) {
    __nv_bfloat16* out = reinterpret_cast<__nv_bfloat16*>(dst);
    for (uint64_t i = 0; i < n; ++i)
        out[i] = __float2bfloat16(src[i]);
}

} // namespace

LaneImageCopier::LaneImageCopier(const Runner& run, const MemoryPlan& plan)
    : run_(run), plan_(plan), geo_(kv_row_geometry(run, plan)), row_bytes_(plan.kv_row_bytes),
      n_full_(run.config().n_full_attention_layers()), n_gdn_(run.config().n_linear_attention_layers()) {
    if (uint64_t(run.max_pages()) * 4 > kSlotPagesBytes)
        throw Error("cuda: a lane of " + std::to_string(run.max_pages()) + " KV pages is beyond the copier's page rows");
    const uint64_t slot = uint64_t(n_gdn_) * (conv_bytes() + run.recurrent_floats_per_lane() * 4);
    for (int s = 0; s < kSaveSlots; ++s) {
        gdn_slots_[s] = arena_.alloc_n<uint8_t>(std::max<uint64_t>(slot, 16), "checkpoint GDN slot");
        slot_pages_[s] = arena_.alloc_n<int32_t>(kSlotPagesBytes / 4, "checkpoint page rows");
        if (plan.mtp)
            slot_mtp_rows_[s] = arena_.alloc_n<float>(uint64_t(kMtpRows) * run.hidden_stride(), "checkpoint MTP rows");
        cuda_check(cudaEventCreateWithFlags(&slot_ready_[s], cudaEventDisableTiming), "checkpoint events");
    }
    for (Bounces* b : {&out_, &in_})
        for (int i = 0; i < 2; ++i) {
            b->device[i] = arena_.alloc_n<uint8_t>(kBounceBytes, "lane image bounce");
            cuda_check(cudaMallocHost(&b->pinned[i], kBounceBytes), "pinned lane image bounce");
            cuda_check(cudaEventCreateWithFlags(&b->ready[i], cudaEventDisableTiming), "lane image events");
        }
    cuda_check(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking), "checkpoint copy stream");
    thread_ = std::thread([this] { copier_main(); });
}

LaneImageCopier::~LaneImageCopier() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    changed_.notify_all();
    thread_.join(); // after the jobs in the queue: none leaves GPU work behind on freed buffers
    cudaStreamSynchronize(copy_stream_);
    cudaStreamDestroy(copy_stream_);
    for (Bounces* b : {&out_, &in_})
        for (int i = 0; i < 2; ++i) {
            cudaFreeHost(b->pinned[i]);
            cudaEventDestroy(b->ready[i]);
        }
    for (cudaEvent_t e : slot_ready_)
        cudaEventDestroy(e);
}

uint64_t LaneImageCopier::device_bytes(const ModelConfig& c, bool mtp) {
    const uint64_t conv = uint64_t(c.linear_conv_kernel_dim - 1) * c.gdn_conv_dim() * 4; // f32 bound
    const uint64_t recurrent =
        uint64_t(c.linear_num_value_heads) * c.linear_key_head_dim * c.linear_value_head_dim * 4;
    const uint64_t slot = uint64_t(c.n_linear_attention_layers()) * (conv + recurrent) + kSlotPagesBytes;
    const uint64_t mtp_rows = mtp ? uint64_t(kMtpRows) * ((c.hidden_size + 7) / 8 * 8) * 4 : 0;
    return kSaveSlots * (slot + mtp_rows) + 4 * kBounceBytes;
}

uint64_t LaneImageCopier::mtp_rows_offset(uint32_t m) const { return 8 + uint64_t(m) * plan_.kv_mtp_bytes_per_token; }

uint64_t LaneImageCopier::conv_bytes() const {
    return run_.conv_elems_per_lane() * (run_.f32_activations() ? 4 : 2);
}

LaneImageCopier::GdnSource LaneImageCopier::lane_gdn(int lane) const {
    GdnSource g;
    for (uint32_t l = 0; l < n_gdn_; ++l) {
        g.conv.push_back(run_.f32_activations()
                             ? reinterpret_cast<const uint8_t*>(run_.conv_state_f32(l) + lane * run_.conv_elems_per_lane())
                             : reinterpret_cast<const uint8_t*>(run_.conv_state(l) + lane * run_.conv_elems_per_lane()));
        g.recurrent.push_back(
            reinterpret_cast<const uint8_t*>(run_.recurrent_state(l) + lane * run_.recurrent_floats_per_lane()));
    }
    return g;
}

// A slot holds every GDN layer's conv history, then every layer's recurrent state.
LaneImageCopier::GdnSource LaneImageCopier::slot_gdn(int slot) const {
    GdnSource g;
    const uint8_t* p = gdn_slots_[slot];
    for (uint32_t l = 0; l < n_gdn_; ++l, p += conv_bytes())
        g.conv.push_back(p);
    for (uint32_t l = 0; l < n_gdn_; ++l, p += run_.recurrent_floats_per_lane() * 4)
        g.recurrent.push_back(p);
    return g;
}

std::vector<LaneImageCopier::Chunk> LaneImageCopier::plan_chunks(uint32_t n, const GdnSource* gdn,
                                                                  const MtpPart* mtp) const {
    std::vector<Chunk> chunks;
    const uint64_t pos_bytes = uint64_t(geo_.n_kv_heads) * row_bytes_;
    const int per_chunk = int(std::max<uint64_t>(1, kBounceBytes / pos_bytes));
    if (mtp) { // the MtpKv section: u32 m, u32 r, K then V rows of [0, m), then the rows
        const uint32_t m = mtp->mtp_length;
        for (int value = 0; value < 2; ++value)
            for (int p = 0; p < int(m); p += per_chunk) {
                Chunk c;
                c.kind = Chunk::Kind::MtpKv;
                c.layer = n_full_;
                c.value = value != 0;
                c.pos0 = p;
                c.n_pos = std::min(per_chunk, int(m) - p);
                c.device_bytes = uint64_t(c.n_pos) * pos_bytes;
                c.image_offset = 8 + (uint64_t(value) * m + uint64_t(p)) * pos_bytes;
                chunks.push_back(c);
            }
        const uint64_t row_bytes = uint64_t(run_.config().hidden_size) * 4;
        uint64_t at = mtp_rows_offset(m);
        for (const auto& [rows, count] : mtp->rows) { // rows are hidden_size floats apart (hidden % 16 == 0)
            Chunk c;
            c.kind = Chunk::Kind::MtpRows;
            c.rows = rows;
            c.device_bytes = count * row_bytes;
            c.image_offset = at;
            at += c.device_bytes;
            chunks.push_back(c);
        }
    }
    for (uint32_t fl = 0; fl < n_full_; ++fl)
        for (int value = 0; value < 2; ++value)
            for (int p = 0; p < int(n); p += per_chunk) {
                Chunk c;
                c.layer = fl;
                c.value = value != 0;
                c.pos0 = p;
                c.n_pos = std::min(per_chunk, int(n) - p);
                c.device_bytes = uint64_t(c.n_pos) * pos_bytes;
                c.image_offset = ((uint64_t(2 * fl + uint32_t(value)) * n) + uint64_t(p)) * pos_bytes;
                chunks.push_back(c);
            }
    if (!gdn)
        return chunks;
    const uint64_t ce = run_.conv_elems_per_lane(), rf = run_.recurrent_floats_per_lane();
    for (uint32_t l = 0; l < n_gdn_; ++l)
        chunks.push_back({Chunk::Kind::Conv, l, false, 0, 0, conv_bytes(), uint64_t(l) * ce * 4});
    for (uint32_t l = 0; l < n_gdn_; ++l)
        chunks.push_back({Chunk::Kind::Recurrent, l, false, 0, 0, rf * 4, (uint64_t(n_gdn_) * ce + uint64_t(l) * rf) * 4});
    return chunks;
}

// Device -> host, double-buffered: chunk i's gather and DMA run while chunk i-1 is copied out of
// its pinned buffer into the image.
void LaneImageCopier::copy_out(cudaStream_t stream, Bounces& b, const int32_t* pages, const GdnSource& gdn,
                               LaneImage& image, const MtpPart* mtp) {
    const uint32_t n = uint32_t(image.tokens.size());
    image.kv_dtype = plan_.kv_dtype;
    const std::span<uint8_t> kv = image.add_section(LaneSectionTag::Kv, plan_.lane_image_kv_bytes(n));
    const std::span<uint8_t> gdn_out = image.add_section(LaneSectionTag::Gdn, plan_.lane_image_gdn_bytes());
    std::span<uint8_t> mtp_out;
    if (mtp) {
        const uint32_t m = mtp->mtp_length, r = n - std::min(n, m);
        uint64_t rows = 0;
        for (const auto& piece : mtp->rows)
            rows += piece.second;
        if (m > n || rows != r)
            throw Error("cuda: saving the MTP head's " + std::to_string(rows) + " rows for positions " +
                        std::to_string(m) + ".." + std::to_string(n));
        mtp_out = image.add_section(LaneSectionTag::MtpKv, mtp_rows_offset(m) + uint64_t(r) * run_.config().hidden_size * 4,
                                    /*required=*/false); // without it only drafts suffer
        std::memcpy(mtp_out.data(), &m, 4);
        std::memcpy(mtp_out.data() + 4, &r, 4);
    }
    const std::vector<Chunk> chunks = plan_chunks(n, &gdn, mtp);
    auto enqueue = [&](const Chunk& c, int k) {
        const uint8_t* src = nullptr;
        if (c.kind == Chunk::Kind::MtpRows) {
            src = reinterpret_cast<const uint8_t*>(c.rows);
        } else if (c.kv_rows()) {
            const uint8_t* pool = c.value ? run_.kv_v(c.layer) : run_.kv_k(c.layer);
            cuda_check(kernels::kv_rows_gather(pool, pages, c.pos0, c.n_pos, geo_, b.device[k], stream), "saving KV");
            src = b.device[k];
        } else {
            src = c.kind == Chunk::Kind::Conv ? gdn.conv[c.layer] : gdn.recurrent[c.layer];
        }
        cuda_check(cudaMemcpyAsync(b.pinned[k], src, c.device_bytes, cudaMemcpyDeviceToHost, stream), "saving a lane");
        cuda_check(cudaEventRecord(b.ready[k], stream), "saving a lane");
    };
    auto consume = [&](const Chunk& c, int k) {
        cuda_check(cudaEventSynchronize(b.ready[k]), "saving a lane");
        if (c.kind == Chunk::Kind::Kv)
            std::memcpy(kv.data() + c.image_offset, b.pinned[k], c.device_bytes);
        else if (c.mtp())
            std::memcpy(mtp_out.data() + c.image_offset, b.pinned[k], c.device_bytes);
        else if (c.kind == Chunk::Kind::Conv && !run_.f32_activations())
            widen_bf16(b.pinned[k], run_.conv_elems_per_lane(), reinterpret_cast<float*>(gdn_out.data() + c.image_offset));
        else
            std::memcpy(gdn_out.data() + c.image_offset, b.pinned[k], c.device_bytes);
    };
    for (size_t i = 0; i <= chunks.size(); ++i) {
        if (i < chunks.size())
            enqueue(chunks[i], int(i % 2));
        if (i >= 1)
            consume(chunks[i - 1], int((i - 1) % 2));
    }
}

uint64_t LaneImageCopier::begin_save(int lane, std::vector<int32_t> tokens, std::vector<uint32_t> pages,
                                     const MtpPart* mtp) {
    int slot = -1;
    {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return !slot_busy_[0] || !slot_busy_[1]; });
        slot = slot_busy_[0] ? 1 : 0;
        slot_busy_[slot] = true;
    }
    const cudaStream_t s = run_.stream();
    // In stream order: what the next step changes (GDN state) and what a lane reset rewrites (its
    // page-table row). The KV rows below tokens.size() stay as they are while the pages are held.
    cuda_check(cudaMemcpyAsync(slot_pages_[slot], run_.page_table() + uint64_t(lane) * run_.max_pages(),
                               uint64_t(run_.max_pages()) * 4, cudaMemcpyDeviceToDevice, s), "checkpoint page row");
    const GdnSource from = lane_gdn(lane), to = slot_gdn(slot);
    for (uint32_t l = 0; l < n_gdn_; ++l) {
        cuda_check(cudaMemcpyAsync(const_cast<uint8_t*>(to.conv[l]), from.conv[l], conv_bytes(),
                                   cudaMemcpyDeviceToDevice, s), "checkpoint GDN");
        cuda_check(cudaMemcpyAsync(const_cast<uint8_t*>(to.recurrent[l]), from.recurrent[l],
                                   run_.recurrent_floats_per_lane() * 4, cudaMemcpyDeviceToDevice, s),
                   "checkpoint GDN");
    }
    uint32_t taken = 0; // the MTP head's pending rows, which the next steps may overwrite
    for (const auto& [rows, count] : mtp && slot_mtp_rows_[slot] ? mtp->rows : std::vector<std::pair<float*, uint32_t>>{}) {
        if (taken + count > kMtpRows)
            throw Error("cuda: more than " + std::to_string(kMtpRows) + " MTP rows in a checkpoint");
        cuda_check(cudaMemcpyAsync(slot_mtp_rows_[slot] + uint64_t(taken) * run_.hidden_stride(), rows,
                                   uint64_t(count) * run_.hidden_stride() * 4, cudaMemcpyDeviceToDevice, s),
                   "checkpoint MTP rows");
        taken += count;
    }
    cuda_check(cudaEventRecord(slot_ready_[slot], s), "checkpoint event");
    std::lock_guard lock(mutex_);
    const uint64_t id = next_id_++;
    queue_.push_back({id, slot, std::move(tokens), std::move(pages), mtp && slot_mtp_rows_[slot] != nullptr,
                      mtp ? mtp->mtp_length : 0});
    ++in_flight_;
    changed_.notify_all();
    return id;
}

void LaneImageCopier::copier_main() {
    for (;;) {
        Job job;
        {
            std::unique_lock lock(mutex_);
            changed_.wait(lock, [&] { return stop_ || !queue_.empty(); });
            if (queue_.empty())
                return; // stop_ with nothing left
            job = std::move(queue_.front());
            queue_.pop_front();
        }
        Done done;
        done.id = job.id;
        done.image.tokens = std::move(job.tokens);
        try {
            cuda_check(cudaStreamWaitEvent(copy_stream_, slot_ready_[job.slot], 0), "checkpoint event");
            MtpPart part;
            part.mtp_length = job.mtp_length;
            const uint32_t n = uint32_t(done.image.tokens.size());
            if (job.mtp && n > job.mtp_length)
                part.rows.push_back({slot_mtp_rows_[job.slot], n - job.mtp_length});
            copy_out(copy_stream_, out_, slot_pages_[job.slot], slot_gdn(job.slot), done.image, job.mtp ? &part : nullptr);
        } catch (const std::exception& e) {
            done.error = e.what();
            done.image = LaneImage{};
        }
        done.pages = std::move(job.pages);
        std::lock_guard lock(mutex_);
        slot_busy_[job.slot] = false;
        done_.push_back(std::move(done));
        --in_flight_;
        changed_.notify_all();
    }
}

std::vector<LaneImageCopier::Done> LaneImageCopier::take_done(bool wait) {
    std::unique_lock lock(mutex_);
    if (wait)
        changed_.wait(lock, [&] { return in_flight_ == 0; });
    std::vector<Done> out;
    out.swap(done_);
    return out;
}

size_t LaneImageCopier::in_flight() const {
    std::lock_guard lock(mutex_);
    return in_flight_;
}

LaneImage LaneImageCopier::save_now(int lane, const std::vector<int32_t>& tokens, const std::vector<uint32_t>& pages,
                                    const MtpPart* mtp) {
    if (pages.size() * kKvPageTokens < tokens.size())
        throw Error("cuda: a lane of " + std::to_string(tokens.size()) + " tokens holds only " +
                    std::to_string(pages.size()) + " pages");
    LaneImage image;
    image.tokens = tokens;
    copy_out(run_.stream(), in_, run_.page_table() + uint64_t(lane) * run_.max_pages(), lane_gdn(lane), image,
             plan_.mtp ? mtp : nullptr);
    return image;
}

// Host -> device, double-buffered: chunk i is copied into a pinned buffer while chunk i-1 crosses
// PCIe and is scattered into its pages.
uint32_t LaneImageCopier::restore(int lane, const LaneImage& image, const std::vector<uint32_t>& pages,
                                  const MtpTarget* mtp) {
    const uint32_t n = uint32_t(image.tokens.size());
    if (pages.size() * kKvPageTokens < n)
        throw Error("cuda: restoring " + std::to_string(n) + " tokens into " + std::to_string(pages.size()) + " pages");
    const cudaStream_t s = run_.stream();
    const int32_t* page_row = run_.page_table() + uint64_t(lane) * run_.max_pages();
    const GdnSource gdn = lane_gdn(lane);
    // The MtpKv section, when both the image and this plan have the head: checked before any copy.
    const std::span<const uint8_t> mtp_in = image.section(LaneSectionTag::MtpKv);
    uint32_t m = kNoMtp, first = 0;
    MtpPart target;
    if (mtp && plan_.mtp && mtp_in.size() >= 8) {
        uint32_t r = 0;
        std::memcpy(&m, mtp_in.data(), 4);
        std::memcpy(&r, mtp_in.data() + 4, 4);
        const uint64_t H = run_.config().hidden_size;
        if (uint64_t(m) + r != n || mtp_in.size() != mtp_rows_offset(m) + uint64_t(r) * H * 4)
            throw Error("backend: lane image MTP section of " + std::to_string(mtp_in.size()) + " bytes for " +
                        std::to_string(m) + " positions and " + std::to_string(r) +
                        " pending rows does not fit the image's " + std::to_string(n) + " tokens and the plan");
        target = (*mtp)(m, n);
        first = target.mtp_length;
        uint64_t rows = 0;
        for (const auto& piece : target.rows)
            rows += piece.second;
        if (first < m || uint64_t(first) + rows != n)
            throw Error("cuda: restoring the MTP head's rows " + std::to_string(first) + ".." + std::to_string(n));
        target.mtp_length = m; // plan_chunks: K/V rows below m; the rows from position `first` on
    }
    std::vector<Chunk> chunks = plan_chunks(n, &gdn, m == kNoMtp ? nullptr : &target);
    for (Chunk& c : chunks) // the section's rows from position `first` (the target's)
        if (c.kind == Chunk::Kind::MtpRows)
            c.image_offset += uint64_t(first - m) * run_.config().hidden_size * 4;
    const uint64_t ce = run_.conv_elems_per_lane();
    for (size_t i = 0; i < chunks.size(); ++i) {
        const Chunk& c = chunks[i];
        const int k = int(i % 2);
        if (i >= 2)
            cuda_check(cudaEventSynchronize(in_.ready[k]), "restoring a lane"); // chunk i-2 left the buffer
        uint8_t* dst = nullptr;
        if (c.kind == Chunk::Kind::Kv || c.kind == Chunk::Kind::MtpKv) {
            const uint8_t* from = c.kind == Chunk::Kind::Kv ? image.kv().data() : mtp_in.data();
            std::memcpy(in_.pinned[k], from + c.image_offset, c.device_bytes);
            dst = in_.device[k];
        } else if (c.kind == Chunk::Kind::MtpRows) {
            std::memcpy(in_.pinned[k], mtp_in.data() + c.image_offset, c.device_bytes);
            dst = reinterpret_cast<uint8_t*>(c.rows);
        } else if (c.kind == Chunk::Kind::Conv) {
            const float* src = reinterpret_cast<const float*>(image.gdn().data() + c.image_offset);
            if (run_.f32_activations())
                std::memcpy(in_.pinned[k], src, c.device_bytes);
            else
                round_to_bf16(src, ce, in_.pinned[k]);
            dst = const_cast<uint8_t*>(gdn.conv[c.layer]);
        } else {
            std::memcpy(in_.pinned[k], image.gdn().data() + c.image_offset, c.device_bytes);
            dst = const_cast<uint8_t*>(gdn.recurrent[c.layer]);
        }
        cuda_check(cudaMemcpyAsync(dst, in_.pinned[k], c.device_bytes, cudaMemcpyHostToDevice, s), "restoring a lane");
        if (c.kv_rows()) {
            uint8_t* pool = c.value ? run_.kv_v(c.layer) : run_.kv_k(c.layer);
            cuda_check(kernels::kv_rows_scatter(pool, page_row, c.pos0, c.n_pos, geo_, in_.device[k], s), "restoring KV");
        }
        cuda_check(cudaEventRecord(in_.ready[k], s), "restoring a lane");
    }
    cuda_check(cudaStreamSynchronize(s), "restoring a lane");
    return m;
}

} // namespace ninfer::core::cuda
