// ninfer::core - the CUDA backend's MTP head driver (docs/MODEL.md §8): it feeds the head the main
// model's final-normed hidden rows as their next tokens become known, and drafts greedily on the
// device for speculative decoding (Backend::draft_mtp, backend.h).
//
// Contract:
// - The head's position t takes (h_t, x_{t+1}) and writes the MTP layer's K/V at position t
//   (Runner::enqueue_mtp). A lane's head has taken positions [mtp_length, ...) no further; the
//   hidden rows of the later positions wait, on the device, in a ring of kRingRows f32 rows per
//   lane indexed by position (slot = position % kRingRows). Rows enter the ring from a decode step
//   (enqueue_keep_step_rows, inside the decode graph), a verify window (the same call after each of
//   its forward blocks) and a prefill chunk (take_prefill), and leave it when the head consumes
//   them. The head runs lazily: take_prefill runs it over every prompt position whose next token is
//   known (so the prompt passes causally through the head, all of it), draft() catches up whatever
//   decode or verify left pending; a decode step runs it only for a lane kCatchUpRows positions
//   behind (catch_up_behind, before the step). A lane that still went more than kRingRows
//   positions without a catch-up (its next tokens unknown) loses its oldest rows: the head skips
//   those positions (their MTP K/V stay stale, as after a lane restore; drafts only get worse,
//   verification keeps the output exact).
// - draft(requests, lanes) is Backend::draft_mtp over the CUDA lanes: one batched catch-up (blocks
//   of up to 8 rows of any lanes) that ends with each lane's last position n-1 fed with next_token,
//   then one batched head step per further draft at positions n..n+k-2, fed (d, the draft just
//   made) where d is the head's own output row. Greedy argmax on the device (the lowest id on
//   ties); drafts stay on the device until one copy back at the end. Position n-1 stays pending,
//   so drafting changes no lane state and can be repeated; the draft positions' K/V rows are
//   scratch that the next catch-up overwrites before anything attends to them. A lane gets no
//   drafts when its head lacks the hidden row of position n-1 (reset, or restored from an image
//   without the MtpKv section and not decoded since) or when n + 1 + k would pass max-context (k
//   is lowered to what fits). reserve(lane, t) must give the lane pages for t tokens before the
//   draft positions are written.
// - The greedy round (Backend::verify_accept_greedy; mtp_head_round.cpp), after the lanes' verify
//   windows and their acceptance, drafts each lane's next round with nothing read back, in two
//   halves. stage_round(lanes, reserve) is the host's: the checks, k per lane (lowered so that the
//   longest window's drafts fit max-context; 0: no drafts: the head lacks the lane's state; it
//   returns them), reserve(lane, t) for the longest window's draft positions, and every block's
//   step inputs written to its own pinned slot: one batched catch-up over every window position but
//   the last (positions mtp_length .. start + count - 2, tokens known on the host; the rows past
//   the kept ones are scratch K/V that the draft rows and the next catch-up overwrite before
//   anything attends to them), then k draft steps. enqueue_round(device) is the device's: each
//   block's copy from its slot and its launches; a draft step's rows get their tokens and
//   positions from kernels::round_draft_inputs, from the kept counts (draft 1: the token after the
//   kept ones at position start + n_keep - 1). It reads only device and pinned memory and never
//   waits, so a round's graph captures it, unless a catch-up row has a kept M-RoPE position:
//   round_key(key) appends the staged round's shape (per block: rows, first draft row, column,
//   keep, draft step) to key, or returns false for such a round (it runs eagerly). The slots are
//   the round's until the caller's synchronisation. read_round_drafts() enqueues the one copy of
//   the drafts to pinned memory; after the caller's synchronisation round_drafts(lane, k) are the
//   drafts and finish_round(lane, start, n_keep) records that the head took positions below
//   start + n_keep - 1 (the last kept stays pending, as after draft()).
// - mark(lane) remembers the head's progress of a lane (a verify window's accept, backend.h);
//   rewind(lane) puts it back: a smaller keep after a draft (the ring still holds the rows).
// - Token ids the catch-up needs must be known on the host (no pipelined decode step of the lane
//   outstanding): else ninfer::Error("backend: ...").
// - Multimodal lanes (backend.h prefill_with), as the CPU head (core/cpu/mtp_head.h) and
//   docs/MODEL.md §8: position t runs at the main model's RoPE position of token t, and when
//   x_{t+1} is a placeholder of the chunk being prefilled its input is the tower's row.
//   take_prefill's `multimodal` (the chunk's inputs of its n rows) gives both: the chunk's M-RoPE
//   positions are kept on the host for its positions that stay pending (rope_ below, the CPU's
//   LaneState::mtp_rope) until the head consumes them, and a block of rows that has such a
//   position or a tower row goes through Runner::enqueue_mtp / PrefillRunner::enqueue_mtp with
//   explicit positions and rows. Every other position is a text position: t + the lane's RoPE
//   offset (set_rope_offset, the value the backend keeps in Runner::rope_offsets(), which the
//   kernels add themselves); drafts past the lane are text positions. A lane image keeps no
//   positions (the CPU's MtpKv section has none): pending rows restored from one are text
//   positions on both backends.
// - Lane images carry the head (the MtpKv section, core/cuda/lane_image.h): pending(), and
//   restore_target() / restored() around LaneImageCopier::restore.
// - device_bytes(config, n_lanes, max_draft_tokens) is what it allocates, for the memory plan.
// Thread safety: engine thread only; it reuses the runner's step buffers (step_in, step rows,
// logits), so it runs between steps, never inside one.
#pragma once

#include "core/backend/backend.h"
#include "core/cuda/cuda_runner.h"
#include "core/cuda/lane_image.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

namespace ninfer::core::cuda {

class PrefillRunner;

class MtpHead {
  public:
    static constexpr int kRingRows = 32;
    static constexpr uint32_t kMinChunkRows = 16; // fewer prompt positions take the decode kernels
    static constexpr uint32_t kCatchUpRows = kRingRows - 8; // see catch_up_behind
    static uint64_t device_bytes(const ModelConfig& config, int n_lanes, uint32_t max_draft_tokens);

    MtpHead(Runner& run, const MemoryPlan& plan);
    uint64_t bytes() const { return arena_.bytes(); }

    // An empty lane: the head has taken nothing.
    void reset(int lane) { advance(lane, 0, true); }
    // A lane restored with n tokens: the head starts from position n (its K/V below are stale).
    void skip_to(int lane, uint32_t n) { advance(lane, n, true); }
    uint32_t mtp_length(int lane) const { return mtp_length_.at(size_t(lane)); }
    // The lane's RoPE offset (next text position - token count), as the backend set it on the device.
    void set_rope_offset(int lane, int64_t offset) { rope_offset_.at(size_t(lane)) = offset; }

    // Lane images (lane_image.h MtpPart): the head's state of a lane of n tokens, for a save (the
    // pending rows in the ring; at most kRingRows, as clamp_pending would keep); where an image's
    // pending rows go on restore (the last kRingRows of them into the ring); and the head's length
    // after a restore of an image with the head's length m (kNoMtp: without a section, as skip_to).
    MtpPart pending(int lane, uint32_t n) const;
    MtpPart restore_target(int lane, uint32_t m, uint32_t n) const;
    void restored(int lane, uint32_t m, uint32_t n);

    // Enqueues the copy of the runner's step rows 0..n-1 into the ring at their step_in lanes and
    // positions (graph-capturable).
    void enqueue_keep_step_rows(int n);
    // Before a decode step of a lane of these tokens: when kCatchUpRows or more positions wait, the
    // head takes every one whose next token is known (a lane decoding without drafts never lets
    // its ring wrap).
    void catch_up_behind(int lane, std::span<const int32_t> tokens);
    // After the main model ran a lane's prompt rows [start, start + n) (before: the lane's tokens
    // until this prefill call, added: the call's tokens, from position before.size()): rows holds
    // their final-normed f32 rows (row stride `stride`), or null when they are the runner's step
    // rows 0..n-1. Feeds the head every pending position whose next token is known; position
    // start + n - 1 stays pending.
    // chunk: the tensor-core prefill that left those rows (rows = its final_rows_f32): when the lane
    // has at most its chunk's previous position pending and 16 or more positions are due, the
    // catch-up runs there, as one chunk (PrefillRunner::enqueue_mtp), else on the decode kernels.
    // multimodal: a prefill_with chunk's inputs of tokens [start, start + n) (n of each), or null.
    void take_prefill(int lane, std::span<const int32_t> before, std::span<const int32_t> added, uint32_t start, int n,
                      const float* rows, int64_t stride, PrefillRunner* chunk = nullptr,
                      const PrefillInputs* multimodal = nullptr);
    std::vector<std::vector<int32_t>> draft(std::span<const DraftRequest> requests,
                                            std::span<const std::span<const int32_t>> lane_tokens,
                                            const std::function<void(int lane, size_t tokens)>& reserve,
                                            std::vector<std::vector<float>>* logits);

    // The greedy round (the contract above).
    struct RoundLane {
        int lane = 0;
        int k = 0;                       // drafts wanted
        uint32_t start = 0, count = 0;   // the verify window
        std::span<const int32_t> tokens; // the lane's tokens, the window's included
    };
    struct RoundInputs {
        const int32_t* starts = nullptr; // device, by lane: the window's first position
        const int32_t* n_keep = nullptr; // device, by lane: tokens kept
        const int32_t* ids = nullptr;    // device, by lane: the window's greedy picks
        int ids_stride = 0;
    };
    std::vector<int> stage_round(std::span<const RoundLane> lanes,
                                 const std::function<void(int lane, size_t tokens)>& reserve);
    bool round_key(std::vector<int>& key) const;
    void enqueue_round(const RoundInputs& device);
    void read_round_drafts() const;
    std::vector<int32_t> round_drafts(int lane, int k) const;
    void finish_round(int lane, uint32_t start, uint32_t n_keep) { advance(lane, start + n_keep - 1); }
    void mark(int lane) { marks_.at(size_t(lane)) = {mtp_length_.at(size_t(lane)), rope_.at(size_t(lane))}; }
    void rewind(int lane) {
        const Mark& m = marks_.at(size_t(lane));
        mtp_length_.at(size_t(lane)) = m.length;
        rope_.at(size_t(lane)) = m.rope;
    }
    ~MtpHead();
    MtpHead(const MtpHead&) = delete;
    MtpHead& operator=(const MtpHead&) = delete;

  private:
    struct Row {
        int lane = 0;
        uint32_t position = 0;
        int32_t token = 0;   // x_{t+1}; for a draft step >= 2, ignored (taken from the drafts table)
        int request = -1;    // >= 0: a draft row of this request (its logits, argmax, fed back)
        std::optional<MropePosition> rope; // a kept M-RoPE position (rope_), else the text position
        int32_t embedding_row = -1;        // >= 0: x_{t+1}'s row of run()'s embeddings (a placeholder)
    };
    // One block of at most 8 rows through the head: its step inputs staged on the host, and what
    // its launches need from the host besides.
    struct Block {
        int n = 0, first_draft = 0;       // rows [first_draft, n) are draft rows
        bool multimodal = false;          // explicit positions and rows (pageable uploads)
        std::vector<MropePosition> positions;
        std::vector<int32_t> embedding_rows;
        const int32_t* staged = nullptr;  // 3 x kMaxStepTokens ints: tokens, lanes, positions
    };
    // Rows [b0, b1) staged into `staged` (host only).
    Block stage_block(const std::vector<Row>& rows, size_t b0, size_t b1, int32_t* staged) const;
    // The block's launches: its inputs copied up, (round: the draft rows' tokens and positions built
    // on the device; chained: the draft tokens from column - 1 of the table), the head, the argmax
    // of its draft rows into the table's column, and their rows kept (keep_drafts).
    void enqueue_block(const Block& block, int column, bool chained, bool keep_drafts,
                       std::span<const float> embeddings, const RoundInputs* round);
    // The rows through the head in blocks of 8, in order; stage(b0, b1) runs before block [b0, b1)
    // (puts its hidden rows in the ring). column: the drafts table column of the draft rows;
    // chained: the draft rows' tokens come from column - 1 of the table. embeddings: the rows
    // Row::embedding_row indexes (a prefill_with chunk's).
    void run(const std::vector<Row>& rows, int column, bool chained, bool keep_drafts,
             const std::function<void(size_t, size_t)>& stage, std::vector<std::vector<float>>* logits,
             std::span<const float> embeddings = {});
    // Pinned block slots a greedy round may need (its catch-up, then its draft steps).
    int round_slots() const;
    // A pending position's row: (lane, t, x_{t+1}) with its kept position, if any.
    Row pending_row(int lane, uint32_t t, int32_t token) const;
    // The lane's head has taken positions below m: its kept positions of those go (clear: all of them).
    void advance(int lane, uint32_t m, bool clear = false);
    // Keeps the chunk's M-RoPE positions of tokens [start, start + count) for the lane's pending
    // positions (positions pending before start keep their text positions).
    void keep_positions(int lane, uint32_t start, std::span<const MropePosition> positions);
    // The ring's rows of positions [p0, p1) (p1 - p0 <= kRingRows) as at most two pieces.
    MtpPart ring_pieces(int lane, uint32_t p0, uint32_t p1) const;
    // Copies f32 rows of positions [p0, p1) (src row 0 = position src_start) into the lane's ring.
    void stage_rows(int lane, uint32_t p0, uint32_t p1, const float* src, uint32_t src_start, int64_t stride);
    // Positions whose rows the ring no longer holds (more than kRingRows pending before `end`) are skipped.
    void clamp_pending(int lane, uint32_t end);
    float* ring_row(int lane, uint32_t position) const;

    Runner& run_;
    const MemoryPlan& plan_;
    DeviceArena arena_;
    int64_t hs_ = 0;
    int drafts_w_ = 1;             // columns of the drafts table (max_draft_tokens)
    float* ring_ = nullptr;        // [n_lanes][kRingRows][hs_]
    float* hidden_ = nullptr;      // [8][hs_]: a block's h rows
    int32_t* drafts_ = nullptr;    // [n_lanes][drafts_w_]
    std::vector<uint32_t> mtp_length_;
    // Per lane: the main model's positions of pending positions [mtp_length, mtp_length + size)
    // from a prefill_with chunk (empty for text lanes), and the lane's RoPE offset.
    std::vector<std::vector<MropePosition>> rope_;
    std::vector<int64_t> rope_offset_;
    std::vector<int32_t> step_in_; // host copy of a block's step inputs
    int32_t* drafts_host_ = nullptr; // pinned copy of drafts_ (a greedy round's one read-back)
    // The staged greedy round: its blocks, each with its own pinned inputs in round_in_host_.
    struct RoundBlock {
        Block block;
        int column = 0;
        bool keep = false;   // the draft rows feed the next draft step
        bool device = false; // a draft step: tokens and positions from the kept counts
    };
    std::vector<RoundBlock> round_blocks_;
    int32_t* round_in_host_ = nullptr; // pinned [round_slots()][3 * kMaxStepTokens]
    struct Mark {
        uint32_t length = 0;
        std::vector<MropePosition> rope;
    };
    std::vector<Mark> marks_;
};

} // namespace ninfer::core::cuda
