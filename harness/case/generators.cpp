#include "harness/case/generators.h"

#include <algorithm>
#include <charconv>

#include "harness/case/scale_generator.h"
#include "kernels/abi/dtype.h"

namespace afz {
namespace {

// ------------------------------------------------------------ the data --

// Key/query block sizes that tiled kernels use: lengths near their
// multiples exercise partial last blocks and blocks of one key.
constexpr int kBlockSizes[] = {16, 32, 64, 128};
// Inputs: the tensor-core dtypes twice as often as fp32.
constexpr afz_dtype kInDtypes[] = {AFZ_BF16, AFZ_F16, AFZ_BF16, AFZ_F16, AFZ_F32};
// Head dims of real models, 64 twice as often.
constexpr int kCommonHeadDims[] = {64, 64, 128, 32, 16, 8, 96};
// The shapes class sweeps 8..256 with odd sizes among them; a kernel that
// does not claim a size declines it (unsupported), never fails.
constexpr int kAllHeadDims[] = {8,  16, 24, 32, 40, 48,  64,  72,  80,  96,  112, 128,
                                160, 192, 224, 256, 9, 15, 33, 63, 65, 127, 129, 255};
// Multiply-adds a typical case may cost (q.k plus p.v over b, h, i, j):
// keeps the CPU kernels and the oracle at many cases per second.
constexpr int64_t kWorkBudget = int64_t{1} << 21;
// The flat class's long rows (8K keys and more) with a few queries.
constexpr int64_t kLongRowBudget = int64_t{1} << 22;
// The carrier coordinate k_j[0] = target / scale must stay well inside the
// input dtype's range, or it rounds to Inf and the case is about overflow
// of the *inputs*, not of the kernel's arithmetic.
constexpr double kCarrierHeadroom = 0.5;
// Backward classes.  Score offsets and row amplitudes that put a row's LSE
// beyond kBwdExtremeLse either way (|offset| - ln(keys) - the rest of q.k
// stays past it), up to where an fp32 score still resolves P (|s| u_s < 1e-3).
constexpr double kExtremeLseOffsets[] = {-120.0, -200.0, -1000.0, -1e4, 120.0, 200.0, 1000.0, 1e4};
constexpr double kExtremeLseAmps[] = {120.0, 1000.0, 1e4};
// dO rows expected nonzero per case (few_rows): a few rows carry the whole
// gradient, and at most a quarter of the rows do.
constexpr int kFewRowsTargets[] = {1, 2, 4, 8};
constexpr int kFewRowsMaxPermil = 250;
// Queries per head of the dO-rows class: enough rows that "a few" is most.
constexpr int kFewRowsMinQueries = 32, kFewRowsMaxQueries = 256;
// Sizes of the masked-rows class: small, so fit_work never shrinks away the
// rows it empties.
constexpr int kMaskedRowsMaxKeys = 64, kMaskedRowsMaxExtra = 48, kMaskedRowsPaddedMax = 32;
// GQA groups: query heads per KV head.
constexpr int kGqaGroups[] = {2, 3, 4, 8};

// The largest |x| a normal(1) draw can take: a sum of four U(-1/2, 1/2)
// times sqrt(3) is at most 2 sqrt(3) < 3.5.
constexpr double kNormalReach = 3.5;

// ------------------------------------------------------ shared pieces --

int block_edge_len(Dice& d) {
  const int block = d.pick(kBlockSizes);
  const int blocks = d.range(1, 4);
  const int delta = d.pick({-1, 0, 1, d.range(2, block - 1)});
  return std::max(1, blocks * block + delta);
}

// Most rows short, some a few blocks long, some at a block edge.
int short_len(Dice& d) {
  const uint64_t kind = d.below(10);
  if (kind < 4) return d.range(1, 64);
  if (kind < 7) return d.range(65, 160);
  if (kind < 9) return d.range(161, 300);
  return block_edge_len(d);
}

afz_align pick_align(Dice& d) { return d.chance(500) ? AFZ_ALIGN_TOP_LEFT : AFZ_ALIGN_BOTTOM_RIGHT; }

void set_window(Case& c, int left, int right, afz_align align) {
  c.has_window = true;
  c.window_left = left;
  c.window_right = right;
  c.align = align;
}

void set_causal(Case& c, afz_align align) { set_window(c, -1, 0, align); }

void set_batch(Case& c, int batch) {
  c.batch = batch;
  c.seqlens_q.resize(size_t(batch), c.seqlens_q.empty() ? 1 : c.seqlens_q.back());
  c.seqlens_k.resize(size_t(batch), c.seqlens_k.empty() ? 1 : c.seqlens_k.back());
}

Case base_case(Dice& d) {
  Case c;
  c.seed = d.u64();
  c.in_dtype = d.pick(kInDtypes);
  c.out_dtype = d.chance(150) ? AFZ_F32 : c.in_dtype;
  c.head_dim = c.head_dim_v = d.pick(kCommonHeadDims);
  c.seqlens_q = {short_len(d)};
  c.seqlens_k = {short_len(d)};
  return c;
}

// One step of shrinking the shape of a case: the longer sequence side, then
// head_dim.  False when nothing is left to shrink.
bool shrink_shape(Case& c) {
  auto halve = [](std::vector<int32_t>& s) {
    for (int32_t& n : s) n = (n + 1) / 2;
  };
  if (c.max_seqlen_k() > 1 && c.max_seqlen_k() >= c.max_seqlen_q()) {
    halve(c.seqlens_k);
  } else if (c.max_seqlen_q() > 1) {
    halve(c.seqlens_q);
  } else if (c.head_dim > 8) {
    c.head_dim = (c.head_dim + 1) / 2;
    c.head_dim_v = (c.head_dim_v + 1) / 2;
  } else {
    return false;
  }
  return true;
}

// Shrinks a case until its work fits: batch first, then heads, then the
// longer sequence side, then head_dim.  Deterministic, so a generator's
// case stays a pure function of its draws.
void fit_work(Case& c, int64_t budget) {
  while (case_work(c) > budget) {
    if (c.batch > 1) {
      set_batch(c, c.batch - 1);
      continue;
    }
    const int ratio = c.heads_q / c.heads_kv;
    if (ratio > 1) {
      c.heads_q = c.heads_kv * (ratio / 2);
      continue;
    }
    if (c.heads_kv > 1) {
      c.heads_kv /= 2;
      c.heads_q = c.heads_kv;
      continue;
    }
    if (!shrink_shape(c)) return;
  }
}

// The same without touching batch or heads: for the class whose point is
// the head structure (GQA groups).
void fit_work_keeping_heads(Case& c, int64_t budget) {
  while (case_work(c) > budget && shrink_shape(c)) {
  }
}

// Planted scores need k_j[0] = target / scale in range: where the default
// scale would push it out, the case states scale 1 instead.
void keep_carrier_in_range(Case& c, double max_target) {
  const double limit = max_finite(c.in_dtype) * kCarrierHeadroom;
  if (max_target / double(c.effective_scale()) > limit) c.scale = 1.0;
}

Transform transform(const char* name, std::vector<std::pair<std::string, double>> params) {
  return Transform{name, std::move(params)};
}

// A boolean/additive mask pattern over a sq x sk sequence.
MaskPattern random_pattern(Dice& d, int sq, int sk) {
  sq = std::max(sq, 1);
  sk = std::max(sk, 1);
  switch (d.below(6)) {
    case 0: {
      const int k = d.pick({2, 3, 7, 16});
      return {"rows_every", {k, d.range(0, k - 1)}};
    }
    case 1: {
      const int k = d.pick({2, 3, 5, 64});
      return {"cols_every", {k, d.range(0, k - 1)}};
    }
    case 2: {
      const int lo = d.range(-60, 10);
      return {"band", {lo, lo + d.range(0, 60)}};
    }
    case 3: {
      const int i0 = d.range(0, sq - 1), j0 = d.range(0, sk - 1);
      return {"block", {i0, d.range(i0 + 1, sq), j0, d.range(j0 + 1, sk)}};
    }
    case 4: {
      const int bc = d.pick(kBlockSizes);
      const int i0 = d.range(0, sq - 1);
      return {"key_block", {bc, i0, d.range(i0, sq - 1), d.range(0, (sk - 1) / bc)}};
    }
    default: return {"random", {d.pick({100, 500, 900, 990})}};
  }
}

// A moving row maximum (issue's late maxima): the largest scores in the last
// keys or block, a max growing every key block (every step rescales), or
// the max first and smaller ever after.  Returns the largest planted score.
double plant_moving_max(Dice& d, Case& c, int block) {
  switch (d.below(4)) {
    case 0:
    case 1: {
      const double boost = d.pick({8.0, 20.0, 60.0});
      c.transforms.push_back(transform("late_max", {{"count", d.pick({1, 2, 5, block})}, {"boost", boost}}));
      return boost;
    }
    case 2: {
      const double step = d.pick({0.5, 2.0, 8.0});
      c.transforms.push_back(transform("growing_max", {{"block", block}, {"step", step}}));
      return step * double(c.seqlens_k[0] / block);
    }
    default: {
      const double boost = d.pick({20.0, 60.0});
      c.transforms.push_back(transform("early_max", {{"count", d.pick({1, 3})}, {"boost", boost}}));
      return boost;
    }
  }
}

// Extreme magnitudes: q scaled up, every score shifted far down or up, rows
// of +amp and -amp in one tile, huge late maxima, softcap over large
// scores.  Returns the largest planted score.
double plant_magnitude(Dice& d, Case& c) {
  double max_target = 0;
  switch (d.below(5)) {
    case 0: {
      const double factor = d.pick({16.0, 128.0, 1024.0, 4096.0});
      // |q| * factor must stay finite in the input dtype.
      const double fits = max_finite(c.in_dtype) * kCarrierHeadroom / kNormalReach;
      c.transforms.push_back(transform("scale_q", {{"factor", std::min(factor, fits)}}));
      break;
    }
    case 1: {
      const double offset = d.pick({-90.0, -100.0, -200.0, -1000.0, -1e4, -3e4, 12.0, 20.0, 100.0, 1e4});
      c.transforms.push_back(transform("shift_scores", {{"offset", offset}}));
      max_target = offset < 0 ? -offset : offset;
      break;
    }
    case 2: {
      const double amp = d.pick({100.0, 1000.0, 1e4});
      c.transforms.push_back(transform("row_contrast", {{"amp", amp}}));
      max_target = amp;
      break;
    }
    case 3: {
      const double boost = d.pick({1000.0, 1e4});
      c.transforms.push_back(transform("late_max", {{"count", d.range(1, 5)}, {"boost", boost}}));
      max_target = boost;
      break;
    }
    default:
      c.softcap = d.pick({20.0, 30.0, 50.0});
      c.transforms.push_back(transform("scale_q", {{"factor", d.pick({16.0, 128.0})}}));
      break;
  }
  return max_target;
}

// --------------------------------------------------------- generators --

// Shapes: block edges, lengths shorter than a block, 1, seqlen_q != seqlen_k
// both ways, head dims 8..256 (odd ones too), GQA/MQA, varlen batches with
// zero-length sequences, one query over a long key sequence (decode).
Case gen_shapes(Dice& d) {
  Case c = base_case(d);
  switch (d.below(8)) {
    case 0:
      c.seqlens_q = {block_edge_len(d)};
      c.seqlens_k = {block_edge_len(d)};
      break;
    case 1: {
      const int block = d.pick(kBlockSizes);
      c.seqlens_q = {d.range(1, block - 1)};
      c.seqlens_k = {d.range(1, block - 1)};
      break;
    }
    case 2: {
      const uint64_t which = d.below(3);
      if (which != 1) c.seqlens_q = {1};
      if (which != 0) c.seqlens_k = {1};
      break;
    }
    case 3: {
      const int n = short_len(d), delta = d.range(1, 100);
      const bool more_keys = d.chance(500);
      c.seqlens_q = {more_keys ? n : n + delta};
      c.seqlens_k = {more_keys ? n + delta : n};
      break;
    }
    case 4:
      c.head_dim = d.pick(kAllHeadDims);
      c.head_dim_v = d.chance(300) ? d.pick(kAllHeadDims) : c.head_dim;
      break;
    case 5:
      c.heads_kv = d.pick({1, 1, 2, 4});
      c.heads_q = c.heads_kv * d.pick({2, 3, 4, 8});
      break;
    case 6: {
      set_batch(c, d.range(2, 5));
      for (int b = 0; b < c.batch; ++b) {
        c.seqlens_q[b] = d.chance(250) ? 0 : short_len(d);
        c.seqlens_k[b] = d.chance(250) ? 0 : short_len(d);
      }
      break;
    }
    default: {  // decode: a few queries over a long key sequence
      set_batch(c, d.range(1, 4));
      for (int b = 0; b < c.batch; ++b) {
        c.seqlens_q[b] = d.chance(750) ? 1 : d.range(2, 4);
        const int keys = d.pick({256, 1000, 2048, 4096});
        c.seqlens_k[b] = keys + d.range(0, 63);
      }
      break;
    }
  }
  if (d.chance(300)) set_causal(c, pick_align(d));
  fit_work(c, kWorkBudget);
  return c;
}

// Late maxima: the largest scores in the last keys or the last block; a max
// that grows every block (every step rescales); the max in the first block
// and smaller ever after (alpha = 1 on every later block).
Case gen_late_max(Dice& d) {
  Case c = base_case(d);
  const int block = d.pick(kBlockSizes);
  // One draw per statement: the operands of + are unsequenced, and the
  // order of draws must not depend on the compiler.
  const int blocks = d.range(2, 6);
  const int delta = d.pick({-1, 0, 1, d.range(2, block - 1)});
  c.seqlens_k = {std::max(1, block * blocks + delta)};
  c.seqlens_q = {d.chance(300) ? c.seqlens_k[0] : d.range(1, 128)};
  const double max_target = plant_moving_max(d, c, block);
  if (d.chance(300)) set_causal(c, pick_align(d));
  if (d.chance(200)) {  // a second sequence puts the late keys at another block offset
    set_batch(c, 2);
    c.seqlens_k[1] = std::max(1, c.seqlens_k[0] - d.range(1, block));
  }
  keep_carrier_in_range(c, max_target);
  fit_work(c, kWorkBudget);
  return c;
}

// Flat rows: near-equal (or exactly equal) scores over 8K keys and more, so
// the normalizer l grows to about N: an l kept in bf16 stops growing at 256.
Case gen_flat(Dice& d) {
  Case c = base_case(d);
  // Small head dims and few queries: the long row is the point, and its
  // inputs are most of what this class costs to build.
  c.head_dim = c.head_dim_v = d.pick({32, 32, 64});
  c.seqlens_q = {d.pick({1, 1, 2, 4})};
  const int keys = d.pick({1024, 4096, 8192, 8192, 8192, 16384});
  c.seqlens_k = {keys + d.pick({0, 0, 1, d.range(2, 127)})};
  if (d.chance(750)) {
    c.transforms.push_back(transform("flat", {{"eps", d.pick({0.0, 1.0 / 1024, 1.0 / 64})}}));
  } else {
    c.transforms.push_back(transform("ties", {}));
  }
  if (d.chance(200)) set_causal(c, AFZ_ALIGN_BOTTOM_RIGHT);
  if (d.chance(300)) c.out_dtype = AFZ_F32;
  fit_work(c, kLongRowBudget);
  return c;
}

// Magnitude: |s| up to 1e4 and beyond; scores past fp16's exp overflow
// point (s > 11.09 unshifted); every score below -90 (fp32 exp underflows)
// or -1e4; neighbouring rows at +amp and -amp inside one query tile.
Case gen_magnitude(Dice& d) {
  Case c = base_case(d);
  const double max_target = plant_magnitude(d, c);
  keep_carrier_in_range(c, max_target);
  fit_work(c, kWorkBudget);
  return c;
}

// Masking: fully masked rows from windows, padding, zero-length sequences
// and explicit masks; a key block empty for some rows of a tile but not for
// others; causal and windows with both alignments.
Case gen_masking(Dice& d) {
  Case c = base_case(d);
  const uint64_t kind = d.below(7);
  switch (kind) {
    case 0: {  // causal with seqlen_q != seqlen_k: bottom-right with more queries empties the first rows
      const int n = short_len(d), delta = d.range(1, 100);
      const bool more_queries = d.chance(500);
      c.seqlens_q = {more_queries ? n + delta : n};
      c.seqlens_k = {more_queries ? n : n + delta};
      set_causal(c, pick_align(d));
      break;
    }
    case 1: {
      const int left = d.pick({-1, 0, 1, 3, 16, 63, 64, 100});
      const int right = d.pick({-1, 0, 1, 5, 64});
      set_window(c, left == -1 && right == -1 ? 0 : left, right, pick_align(d));
      break;
    }
    case 2: {  // padding: sequences with no keys at all
      set_batch(c, d.range(2, 4));
      for (int b = 0; b < c.batch; ++b) {
        c.seqlens_q[b] = short_len(d);
        c.seqlens_k[b] = d.chance(400) ? 0 : short_len(d);
      }
      break;
    }
    case 3: {
      const int k = d.pick({2, 3, 7, 16});
      c.bool_mask = MaskPattern{"rows_every", {k, d.range(0, k - 1)}};
      break;
    }
    case 4: {  // a key block empty for part of a query tile
      const int bc = d.pick(kBlockSizes);
      c.seqlens_q = {d.range(std::max(1, bc / 2), 2 * bc)};
      const int blocks = d.range(2, 4);
      c.seqlens_k = {bc * blocks + d.range(0, bc - 1)};
      const int i0 = d.range(0, c.seqlens_q[0] - 1);
      c.bool_mask = MaskPattern{"key_block", {bc, i0, d.range(i0, c.seqlens_q[0] - 1), d.range(0, c.seqlens_k[0] / bc)}};
      break;
    }
    case 5: c.bool_mask = random_pattern(d, c.seqlens_q[0], c.seqlens_k[0]); break;
    default: {  // rows whose running max is still -inf when a later block arrives
      const int bc = d.pick(kBlockSizes);
      c.seqlens_q = {d.range(1, 2 * bc)};
      const int blocks = d.range(1, 3);
      c.seqlens_k = {c.seqlens_q[0] + bc * blocks + d.range(0, bc - 1)};
      set_window(c, d.range(0, 40), 0, AFZ_ALIGN_BOTTOM_RIGHT);
      const int i0 = d.range(0, c.seqlens_q[0] - 1);
      c.bool_mask = MaskPattern{"key_block", {bc, i0, d.range(i0, c.seqlens_q[0] - 1), 0}};
      break;
    }
  }
  if (kind >= 3 && !c.has_window && d.chance(300)) set_causal(c, pick_align(d));
  fit_work(c, kWorkBudget);
  return c;
}

// Values: ties, exact zeros, subnormals, the largest finite values, and
// NaN or Inf poison just past each valid length and in row gaps, which a
// correct kernel never reads.
Case gen_values(Dice& d) {
  Case c = base_case(d);
  c.poison = d.pick({Poison::NaN, Poison::Inf});
  if (d.chance(500)) {
    set_batch(c, d.range(2, 3));
    for (int b = 0; b < c.batch; ++b) {
      c.seqlens_q[b] = short_len(d);
      c.seqlens_k[b] = short_len(d);
    }
  }
  if (d.chance(300)) c.row_gap = d.pick({1, 2, 5, 8});
  for (Distribution* dist : {&c.values_q, &c.values_k, &c.values_v}) {
    if (!d.chance(300)) continue;
    switch (d.below(3)) {
      case 0: *dist = {"normal", d.pick({0.25, 4.0})}; break;
      case 1: *dist = {"uniform", d.pick({1.0, 2.0})}; break;
      default: *dist = {"int", d.pick({0.0, 1.0, 2.0, 3.0})}; break;
    }
  }
  // The largest finite value only where fp32 statistics hold it: fp16's
  // 65504 squared and summed stays far inside fp32, bf16's 3.4e38 does not
  // (any fp32-accumulating kernel overflows there, correct or not).
  const bool max_ok = c.in_dtype == AFZ_F16;
  const int count = d.range(1, 2);
  for (int n = 0; n < count; ++n) {
    if (d.chance(250)) {
      c.transforms.push_back(transform("ties", {}));
      continue;
    }
    const int kind = max_ok ? int(d.below(3)) : int(d.below(2));
    c.transforms.push_back(transform("special_values", {{"tensor", double(d.below(3))},
                                                        {"kind", double(kind)},
                                                        {"permil", d.pick({10.0, 100.0, 500.0, 1000.0})}}));
  }
  fit_work(c, kWorkBudget);
  return c;
}

// Layouts: BHSD and BSHD, views into a packed QKV buffer, row strides with
// gaps (odd gaps give unaligned row starts), K and V broadcast with stride 0
// across heads or batch, several query heads per KV head.
Case gen_layouts(Dice& d) {
  Case c = base_case(d);
  c.layout = d.pick({Layout::BHSD, Layout::BSHD, Layout::BSHD, Layout::PackedQKV});
  c.row_gap = d.pick({0, 0, 1, 3, 8, 17});
  c.heads_kv = d.range(1, 3);
  c.heads_q = c.heads_kv * d.pick({1, 1, 2, 4});
  set_batch(c, d.range(1, 3));
  if (d.chance(500))
    for (int b = 1; b < c.batch; ++b) {
      c.seqlens_q[b] = short_len(d);
      c.seqlens_k[b] = short_len(d);
    }
  if (c.layout == Layout::PackedQKV) {
    c.head_dim_v = c.head_dim;
  } else if (d.chance(400)) {
    c.kv_broadcast = c.batch > 1 && d.chance(500) ? KvBroadcast::Batch : KvBroadcast::Heads;
  }
  if (d.chance(200)) set_causal(c, pick_align(d));
  fit_work(c, kWorkBudget);
  return c;
}

// Additive masks: -inf, the dtype's lowest finite value and large finite
// negatives, alone and mixed with -inf (a boolean mask) in one row.
Case gen_add_mask(Dice& d) {
  Case c = base_case(d);
  AddMask a;
  switch (d.below(3)) {
    case 0: a.value_kind = AddValueKind::NegInf; break;
    case 1: a.value_kind = AddValueKind::Lowest; break;
    default:
      a.value_kind = AddValueKind::Number;
      a.value = d.pick({-1e4, -3e4, -65504.0, -1e9, -1e30});
      break;
  }
  a.pattern = random_pattern(d, c.seqlens_q[0], c.seqlens_k[0]);
  c.add_mask = a;
  if (d.chance(350)) {
    const int k = d.pick({2, 3, 5});
    c.bool_mask = MaskPattern{"cols_every", {k, d.range(0, k - 1)}};
  }
  if (d.chance(200)) set_causal(c, pick_align(d));
  fit_work(c, kWorkBudget);
  return c;
}

// One structural feature of the composed class: what real kernels meet
// around extreme scores.
void add_structure(Dice& d, Case& c, int block) {
  switch (d.below(7)) {
    case 0: set_causal(c, pick_align(d)); break;
    case 1: {
      const int left = d.pick({0, 1, 3, 16, 63, 64, 100});
      const int right = d.pick({-1, 0, 1, 5, 64});
      set_window(c, left, right, pick_align(d));
      break;
    }
    case 2: {  // a key block empty for part of the rows: the first (the running max is -inf when keys arrive) or any
      const int i0 = d.range(0, c.seqlens_q[0] - 1);
      const int i1 = d.range(i0, c.seqlens_q[0] - 1);
      const int key_block = d.chance(500) ? 0 : d.range(0, (c.seqlens_k[0] - 1) / block);
      c.bool_mask = MaskPattern{"key_block", {block, i0, i1, key_block}};
      break;
    }
    case 3: {
      AddMask a;
      a.value_kind = d.pick({AddValueKind::NegInf, AddValueKind::Lowest, AddValueKind::Number});
      if (a.value_kind == AddValueKind::Number) a.value = d.pick({-1e4, -65504.0, -1e9});
      a.pattern = random_pattern(d, c.seqlens_q[0], c.seqlens_k[0]);
      c.add_mask = a;
      break;
    }
    case 4: c.softcap = d.pick({20.0, 30.0, 50.0}); break;
    case 5:
      c.heads_kv = d.pick({1, 2});
      c.heads_q = c.heads_kv * d.pick({2, 4});
      break;
    default: {  // varlen: more sequences, some of them empty
      set_batch(c, d.range(2, 3));
      for (int b = 1; b < c.batch; ++b) {
        c.seqlens_q[b] = d.chance(200) ? 0 : short_len(d);
        c.seqlens_k[b] = d.chance(200) ? 0 : short_len(d);
      }
      break;
    }
  }
}

// Composed: a moving maximum or an extreme magnitude together with one to
// three structural features (masks and windows in both alignments, key
// blocks empty for part of a tile, additive masks, softcap, GQA/MQA, varlen
// with empty sequences), over rows of several key blocks or a decode row
// long enough for split-KV partitions: defects live where features meet,
// and the single-feature classes rarely combine them.
Case gen_composed(Dice& d) {
  Case c = base_case(d);
  const int block = d.pick(kBlockSizes);
  if (d.chance(250)) {  // decode: a few queries over a row that split-KV kernels cut into partitions
    c.seqlens_q = {d.range(1, 4)};
    const int keys = d.pick({256, 1000, 2048});
    c.seqlens_k = {keys + d.range(0, block)};
  } else {
    const int blocks = d.range(2, 6);
    const int delta = d.pick({-1, 0, 1, d.range(2, block - 1)});
    c.seqlens_k = {std::max(1, block * blocks + delta)};
    c.seqlens_q = {d.chance(500) ? c.seqlens_k[0] : d.range(1, 2 * block)};
  }
  const double max_target = d.chance(600) ? plant_moving_max(d, c, block) : plant_magnitude(d, c);
  const int features = d.range(1, 3);
  for (int n = 0; n < features; ++n) add_structure(d, c, block);
  keep_carrier_in_range(c, max_target);
  fit_work(c, kWorkBudget);
  return c;
}

// ------------------------------------------------ backward generators --
// What breaks gradients (issue 14).  Their cases record `pass bwd`.

// A backward class's case: the common base, recorded as `pass bwd`.
Case backward_base_case(Dice& d) {
  Case c = base_case(d);
  c.pass = Pass::Bwd;
  return c;
}

// dO on about `target` rows of the (fitted) case: few_rows at the per mille
// that expects that many, at most kFewRowsMaxPermil.
void set_few_dout_rows(Case& c, int target) {
  int64_t rows = 0;
  for (int32_t n : c.seqlens_q) rows += int64_t(c.heads_q) * n;
  const int64_t permil = std::clamp<int64_t>(int64_t(target) * 1000 / std::max<int64_t>(rows, 1), 1, kFewRowsMaxPermil);
  c.values_do = {"few_rows", double(permil)};
}

// Rows whose LSE is very negative or very large: every score shifted far
// down or up, or neighbouring rows at +amp and -amp.  A causal mask or a
// window half the time: a masked score taken as 0 instead of -inf gives
// P = exp(0 - LSE), which overflows fp32 for LSE < -88.7.
Case gen_bwd_lse_extreme(Dice& d) {
  Case c = backward_base_case(d);
  double max_target = 0;
  if (d.chance(600)) {
    const double offset = d.pick(kExtremeLseOffsets);
    c.transforms.push_back(transform("shift_scores", {{"offset", offset}}));
    max_target = offset < 0 ? -offset : offset;
  } else {
    max_target = d.pick(kExtremeLseAmps);
    c.transforms.push_back(transform("row_contrast", {{"amp", max_target}}));
  }
  if (d.chance(500)) {
    if (d.chance(500)) {
      set_causal(c, pick_align(d));
    } else {
      set_window(c, d.pick({0, 1, 16, 64}), d.pick({0, 5}), pick_align(d));
    }
  }
  keep_carrier_in_range(c, max_target);
  fit_work(c, kWorkBudget);
  return c;
}

// Fully masked rows (their gradients are exactly 0) with a nonzero dO:
// causal bottom-right with more queries than keys, whole rows masked by a
// pattern, sequences with queries but no key, a top-left window past the
// last key.  Small sizes, so the emptied rows survive fit_work.
Case gen_bwd_masked_rows(Dice& d) {
  Case c = backward_base_case(d);
  const int sk = d.range(1, kMaskedRowsMaxKeys), extra = d.range(1, kMaskedRowsMaxExtra);
  c.seqlens_k = {sk};
  c.seqlens_q = {sk + extra};
  switch (d.below(5)) {
    case 0: set_causal(c, AFZ_ALIGN_BOTTOM_RIGHT); break;  // rows i < sq - sk see no key
    case 1: {  // rows i % k == offset, offset < sq so at least one row is masked
      const int k = d.pick({2, 3, 7});
      c.bool_mask = MaskPattern{"rows_every", {k, d.range(0, std::min(k, c.seqlens_q[0]) - 1)}};
      break;
    }
    case 2: {  // rows [i0, i1) masked over every key
      const int i0 = d.range(0, c.seqlens_q[0] - 1);
      c.bool_mask = MaskPattern{"block", {i0, d.range(i0 + 1, c.seqlens_q[0]), 0, sk}};
      break;
    }
    case 3: {  // padding: one sequence (at least) with queries and no key
      set_batch(c, d.range(2, 3));
      const int empty = d.range(0, c.batch - 1);
      for (int b = 0; b < c.batch; ++b) {
        c.seqlens_q[b] = d.range(1, kMaskedRowsPaddedMax);
        c.seqlens_k[b] = b == empty ? 0 : d.range(1, kMaskedRowsPaddedMax);
      }
      break;
    }
    default: {  // top-left window: row i sees [i - left, i + right], nothing once i > sk - 1 + left
      const int left = d.pick({0, 1, 3, 16});
      c.seqlens_q = {sk + left + extra};
      set_window(c, left, d.pick({0, 2}), AFZ_ALIGN_TOP_LEFT);
      break;
    }
  }
  if (d.chance(300)) c.values_do = {"uniform", d.pick({1.0, 100.0})};
  fit_work(c, kWorkBudget);
  return c;
}

// dO concentrated on a few rows: most rows' dO exactly 0 (few_rows), so a
// gradient is the contribution of a handful of rows and any row's defect
// is not averaged away; with late maxima or a causal mask at times.
Case gen_bwd_do_rows(Dice& d) {
  Case c = backward_base_case(d);
  const int target = d.pick(kFewRowsTargets);
  c.seqlens_q = {d.range(kFewRowsMinQueries, kFewRowsMaxQueries)};
  double max_target = 0;
  if (d.chance(300)) max_target = plant_moving_max(d, c, d.pick(kBlockSizes));
  if (d.chance(300)) set_causal(c, pick_align(d));
  keep_carrier_in_range(c, max_target);
  fit_work(c, kWorkBudget);
  set_few_dout_rows(c, target);
  return c;
}

// GQA / MQA: dK and dV of a KV head sum over its group's query heads; with
// K and V broadcast across heads (stride 0: one gradient per logical head
// still), BSHD layouts, causal masks and a dO on a few rows at times.  The
// heads are kept whole; the sequences shrink to fit.
Case gen_bwd_gqa(Dice& d) {
  Case c = backward_base_case(d);
  c.heads_kv = d.pick({1, 1, 2, 4});
  c.heads_q = c.heads_kv * d.pick(kGqaGroups);
  if (d.chance(300)) c.layout = Layout::BSHD;
  if (c.heads_kv > 1 && d.chance(250)) c.kv_broadcast = KvBroadcast::Heads;
  if (d.chance(300)) set_causal(c, pick_align(d));
  const bool few_rows = d.chance(250);
  const int target = d.pick(kFewRowsTargets);
  fit_work_keeping_heads(c, kWorkBudget);
  if (few_rows) set_few_dout_rows(c, target);
  return c;
}

}  // namespace

int64_t case_work(const Case& c) {
  int64_t work = 0;
  for (int b = 0; b < c.batch && b < int(c.seqlens_q.size()) && b < int(c.seqlens_k.size()); ++b)
    work += int64_t(c.heads_q) * c.seqlens_q[b] * c.seqlens_k[b] * (c.head_dim + c.head_dim_v);
  return work;
}

const std::vector<GeneratorDef>& generator_table() {
  // name, summary, default weight (within its pass's mix), generator, backward class
  static const std::vector<GeneratorDef> table = {
      {"shapes", "block edges, short and unequal lengths, odd head dims, GQA/MQA, varlen with empty sequences, decode",
       2, gen_shapes, false},
      {"late_max", "largest scores in the last keys or block, a max growing every block, the max first", 2,
       gen_late_max, false},
      {"flat", "near-equal scores over 8K+ keys: l grows large", 1, gen_flat, false},
      {"magnitude", "|s| to 1e4 and beyond, fp16 exp overflow, rows below -90 and -1e4, +/-amp rows in one tile", 2,
       gen_magnitude, false},
      {"masking", "fully masked rows (windows, padding, empty sequences, masks), key blocks empty for part of a tile",
       2, gen_masking, false},
      {"values", "ties, zeros, subnormals, largest finite values, NaN/Inf poison past each length", 1, gen_values,
       false},
      {"layouts", "BHSD/BSHD, packed QKV, row gaps, stride-0 K/V broadcast, several q heads per kv head", 1,
       gen_layouts, false},
      {"add_mask", "additive masks of -inf, the dtype's lowest value, large finite negatives, mixed with -inf", 1,
       gen_add_mask, false},
      {"composed", "a moving max or extreme magnitude with 1-3 of masks, windows, key blocks, softcap, GQA, varlen, "
                   "split-KV length rows",
       2, gen_composed, false},
  };
  return table;
}

const std::vector<GeneratorDef>& backward_generator_table() {
  static const std::vector<GeneratorDef> table = {
      {"bwd_lse_extreme", "backward: rows whose LSE is below -88.7 or above 88.7 (shifted scores, +/-amp rows), "
                          "masked pairs among them",
       2, gen_bwd_lse_extreme, true},
      {"bwd_masked_rows", "backward: fully masked rows with a nonzero dO (causal with more queries, masked rows, "
                          "keyless sequences, windows past the last key): gradients exactly 0",
       2, gen_bwd_masked_rows, true},
      {"bwd_do_rows", "backward: dO concentrated on a few rows (few_rows: the others exactly 0)", 1, gen_bwd_do_rows,
       true},
      {"bwd_gqa", "backward: GQA/MQA groups of 2-8 query heads summing into shared K/V heads, broadcast K/V", 2,
       gen_bwd_gqa, true},
  };
  return table;
}

const std::vector<GeneratorDef>& opt_in_generator_table() {
  // default_weight 0: no default mix draws it (GeneratorMix::defaults
  // never reads this table); named alone it weighs 1 like any class.
  static const std::vector<GeneratorDef> table = {
      {"scale", "opt-in: keys just below/above 2^15, 2^16, 2^17; causal and windowed rows (both alignments) seeing "
                "keys past 32,768; K/V past 2^31 elements; decode over 128K keys; the max past each threshold",
       0, gen_scale, false},
  };
  return table;
}

const GeneratorDef* find_generator(std::string_view name) {
  for (const auto* t : {&generator_table(), &backward_generator_table(), &opt_in_generator_table()})
    for (const GeneratorDef& g : *t)
      if (name == g.name) return &g;
  return nullptr;
}

GeneratorMix GeneratorMix::defaults(Pass pass) {
  GeneratorMix m;
  // A forward campaign's mix leaves the backward classes out: their
  // features are gradients', and the forward seeded campaigns keep the
  // cases they always ran.
  for (const auto* t : {&generator_table(), &backward_generator_table()}) {
    if (t == &backward_generator_table() && pass == Pass::Fwd) continue;
    for (const GeneratorDef& g : *t) {
      m.entries_.push_back({&g, g.default_weight});
      m.total_ += g.default_weight;
    }
  }
  return m;
}

std::optional<GeneratorMix> GeneratorMix::parse(std::string_view spec, std::string* error, Pass pass) {
  if (spec.empty() || spec == "all") return defaults(pass);
  constexpr int kMaxWeight = 1000;
  GeneratorMix m;
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    const std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
    const size_t eq = item.find('=');
    const std::string_view name = item.substr(0, eq);
    const GeneratorDef* g = find_generator(name);
    if (!g) {
      std::string names;
      for (const auto* t : {&generator_table(), &backward_generator_table(), &opt_in_generator_table()})
        for (const GeneratorDef& def : *t) names += (names.empty() ? "" : ", ") + std::string(def.name);
      *error = "unknown generator class '" + std::string(name) + "' (one of: " + names + ")";
      return std::nullopt;
    }
    int weight = 1;
    if (eq != std::string_view::npos) {
      const std::string_view w = item.substr(eq + 1);
      const auto [end, ec] = std::from_chars(w.data(), w.data() + w.size(), weight);
      if (ec != std::errc() || end != w.data() + w.size() || weight < 0 || weight > kMaxWeight) {
        *error = "class " + std::string(name) + ": weight must be a whole number in [0, " +
                 std::to_string(kMaxWeight) + "], got '" + std::string(w) + "'";
        return std::nullopt;
      }
    }
    for (const Entry& e : m.entries_)
      if (e.gen == g) {
        *error = "class " + std::string(name) + " given twice";
        return std::nullopt;
      }
    m.entries_.push_back({g, weight});
    m.total_ += weight;
  }
  if (m.total_ == 0) {
    *error = "every class has weight 0";
    return std::nullopt;
  }
  return m;
}

std::string GeneratorMix::describe() const {
  std::string s;
  for (const Entry& e : entries_) s += (s.empty() ? "" : ",") + std::string(e.gen->name) + "=" + std::to_string(e.weight);
  return s;
}

const GeneratorDef& GeneratorMix::choose(uint64_t seed, uint64_t index) const {
  // Draw 0 of the case's stream picks the class; the generator starts at 1.
  uint64_t ticket = CounterRng(seed, index).below(0, uint64_t(total_));
  for (const Entry& e : entries_) {
    if (ticket < uint64_t(e.weight)) return *e.gen;
    ticket -= uint64_t(e.weight);
  }
  return *entries_.back().gen;
}

Case generate_with(const GeneratorDef& gen, uint64_t seed, uint64_t index) {
  Dice dice{CounterRng(seed, index), 1};
  return gen.make(dice);
}

GeneratedCase generate_case(const GeneratorMix& mix, uint64_t seed, uint64_t index) {
  const GeneratorDef& gen = mix.choose(seed, index);
  return {generate_with(gen, seed, index), &gen};
}

}  // namespace afz
