#include "harness/case/scale_generator.h"

namespace afz {
namespace {

// ------------------------------------------------------------ the data --

// The tensor-core dtypes the GPU kernels take (kernels/cuda/gpu_kernels.cpp):
// fp32 inputs would only be declined there.
constexpr afz_dtype kScaleDtypes[] = {AFZ_BF16, AFZ_F16};
// An fp32 output now and then, as the other classes draw it.
constexpr int kF32OutPermil = 150;
// Head dims the GPU kernels take (32, 64, 96, 128, head_dim_v equal): the
// long rows use the small ones, since their cost is rows x keys.
constexpr int kWideHeadDims[] = {64, 128};
constexpr int kNarrowHeadDims[] = {32, 64};
// GQA groups (query heads per K/V head) and K/V head counts of real models.
constexpr int kGroups[] = {1, 2, 4, 8};
constexpr int kKvHeads[] = {1, 2, 8};

// Queries over a threshold-length key row: a decode step, one block, one
// block and one row (a partial second tile), two blocks.
constexpr int kThresholdQueries[] = {1, 16, 64, 65, 128};
// Long rows under bottom-right alignment: as many queries as keys, or a
// chunk of queries at the end of a long cache (every row sees past 2^15).
constexpr int kChunkQueries[] = {65, 4096};
constexpr int kChunkHeads[] = {1, 2, 4};
// Sliding windows over the long rows: less than a block to the left, a few
// blocks, and a window of 4K and one key; to the right nothing, one key, a
// block.  Causal (-1, 0) is drawn as often as all windows together.
constexpr int kWindowLefts[] = {63, 1000, 4097};
constexpr int kWindowRights[] = {0, 1, 64};
// Decode: queries per sequence and sequences per batch.
constexpr int kDecodeQueries[] = {1, 1, 2, 4};
constexpr int kDecodeMaxBatch = 4;
// The huge-K/V decode batch: K/V heads, GQA groups and queries per sequence
// kept small, so that K and V pass 2^31 elements while Q and O stay small
// (the host oracle result costs tens of bytes per O element).
constexpr int kHugeKvHeads[] = {4, 8};
constexpr int kHugeGroups[] = {1, 2};
constexpr int kHugeQueries[] = {1, 1, 2};
// 2^16 and 2^17 keys per row: the batch that passes 2^31 stays below kMaxBatch.
constexpr int kHugeExponents[] = {kWrapExponents[1], kWrapExponents[2]};

// The planted maximum: in the last keys of each sequence (one, two, a block,
// a block and one), boosted by a few units or past fp16's exp overflow
// point; or a max that steps up at every multiple of 2^15 keys.
constexpr int kLateMaxCounts[] = {1, 2, 64, 65};
constexpr double kLateMaxBoosts[] = {8.0, 20.0};
constexpr double kStepPerWrap[] = {2.0, 8.0};

// ------------------------------------------------------------- shapes --

int power_of_two(int exponent) { return 1 << exponent; }

// Just below or just above 2^exponent.
int near_threshold(Dice& d, int exponent) {
  const int offset = d.pick(kThresholdOffsets);
  return d.chance(500) ? power_of_two(exponent) - offset : power_of_two(exponent) + offset;
}

// Just above 2^exponent: every row this long has keys past the threshold.
int past_threshold(Dice& d, int exponent) { return power_of_two(exponent) + d.pick(kThresholdOffsets); }

void set_heads(Case& c, int heads_kv, int group) {
  c.heads_kv = heads_kv;
  c.heads_q = heads_kv * group;
}

void set_sequences(Case& c, int batch, int queries, int keys) {
  c.batch = batch;
  c.seqlens_q.assign(size_t(batch), queries);
  c.seqlens_k.assign(size_t(batch), keys);
}

void set_band(Case& c, int left, int right, afz_align align) {
  c.has_window = true;
  c.window_left = left;
  c.window_right = right;
  c.align = align;
}

// Key lengths just below and above 2^15, 2^16, 2^17; a second sequence on
// the threshold's other side at times (varlen: one launch sees both).
void threshold_shape(Dice& d, Case& c) {
  const int exponent = d.pick(kWrapExponents);
  c.head_dim = c.head_dim_v = d.pick(kWideHeadDims);
  set_heads(c, d.pick(kKvHeads), d.pick(kGroups));
  set_sequences(c, 1, d.pick(kThresholdQueries), near_threshold(d, exponent));
  if (d.chance(300)) {
    set_sequences(c, 2, c.seqlens_q[0], c.seqlens_k[0]);
    // The mirror image around 2^exponent: below becomes above and back.
    c.seqlens_k[1] = 2 * power_of_two(exponent) - c.seqlens_k[0];
  }
  if (d.chance(300)) set_band(c, -1, 0, AFZ_ALIGN_BOTTOM_RIGHT);
}

// Rows whose visible keys lie past 2^15: causal or a sliding window, both
// alignments.  Top-left needs queries as long as the keys (row i sees keys
// up to i); bottom-right also takes a chunk of queries at the cache's end.
void long_row_shape(Dice& d, Case& c) {
  const int keys = past_threshold(d, d.pick(kWrapExponents));
  c.head_dim = c.head_dim_v = d.pick(kNarrowHeadDims);
  const afz_align align = d.chance(500) ? AFZ_ALIGN_TOP_LEFT : AFZ_ALIGN_BOTTOM_RIGHT;
  int queries = keys;
  if (align == AFZ_ALIGN_BOTTOM_RIGHT && d.chance(500)) {
    queries = d.pick(kChunkQueries);
    set_heads(c, 1, d.pick(kChunkHeads));
  }
  set_sequences(c, 1, queries, keys);
  if (d.chance(500)) set_band(c, -1, 0, align);
  else set_band(c, d.pick(kWindowLefts), d.pick(kWindowRights), align);
}

// A decode batch whose K and V each pass 2^31 elements: the smallest batch
// of (heads_kv x keys x head_dim)-element slices that does.
void huge_kv_shape(Dice& d, Case& c) {
  c.head_dim = c.head_dim_v = d.pick(kWideHeadDims);
  set_heads(c, d.pick(kHugeKvHeads), d.pick(kHugeGroups));
  const int keys = past_threshold(d, d.pick(kHugeExponents));
  const int64_t per_sequence = int64_t(c.heads_kv) * keys * c.head_dim;
  set_sequences(c, int(kElements2p31 / per_sequence + 1), d.pick(kHugeQueries), keys);
}

// One to four queries over 128K keys: the split-KV kernels' shape.
void decode_shape(Dice& d, Case& c) {
  c.head_dim = c.head_dim_v = d.pick(kWideHeadDims);
  set_heads(c, d.pick(kKvHeads), d.pick(kGroups));
  const int batch = d.range(1, kDecodeMaxBatch);
  const int queries = d.pick(kDecodeQueries);
  set_sequences(c, batch, queries, near_threshold(d, kWrapExponents[2]));
  if (d.chance(300)) set_band(c, -1, 0, AFZ_ALIGN_BOTTOM_RIGHT);
}

// The kinds, by weight: the cheap ones most often, the huge K/V batch
// (minutes of input generation on the host) least.
struct ScaleKind {
  int weight;
  void (*shape)(Dice&, Case&);
};
constexpr ScaleKind kKinds[] = {{3, threshold_shape}, {3, long_row_shape}, {2, decode_shape}, {1, huge_kv_shape}};

const ScaleKind& pick_kind(Dice& d) {
  int total = 0;
  for (const ScaleKind& k : kKinds) total += k.weight;
  int ticket = int(d.below(uint64_t(total)));
  for (const ScaleKind& k : kKinds) {
    if (ticket < k.weight) return k;
    ticket -= k.weight;
  }
  return kKinds[0];
}

// The row maximum past the thresholds: in the last keys, or stepping up at
// every multiple of 2^15 keys (a row that sees keys past 2^16 has its max
// past 2^16).  Either way an index wrapped below the threshold reads a key
// whose score is lower.
void plant_late_max(Dice& d, Case& c) {
  if (d.chance(500)) {
    const int count = d.pick(kLateMaxCounts);
    c.transforms.push_back({"late_max", {{"count", count}, {"boost", d.pick(kLateMaxBoosts)}}});
  } else {
    c.transforms.push_back({"growing_max", {{"block", kKeys2p15}, {"step", d.pick(kStepPerWrap)}}});
  }
}

}  // namespace

Case gen_scale(Dice& d) {
  Case c;
  c.seed = d.u64();
  c.in_dtype = d.pick(kScaleDtypes);
  c.out_dtype = d.chance(kF32OutPermil) ? AFZ_F32 : c.in_dtype;
  pick_kind(d).shape(d, c);
  plant_late_max(d, c);
  return c;
}

}  // namespace afz
