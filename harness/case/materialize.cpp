#include "harness/case/materialize.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "harness/case/case_io.h"
#include "harness/case/mask_patterns.h"
#include "harness/case/parallel_chunks.h"
#include "harness/case/rng.h"
#include "harness/case/tensor_scatter.h"
#include "harness/case/tensor_views.h"
#include "harness/case/transforms.h"
#include "kernels/abi/dtype.h"

namespace afz {
namespace {

// RNG streams: one per tensor, so changing V's recipe leaves Q and K alone.
enum Stream : uint64_t { kStreamQ = 1, kStreamK = 2, kStreamV = 3, kStreamMask = 4, kStreamTransform = 100 };

uint64_t fnv1a(uint64_t h, uint64_t word, int bytes) {
  for (int n = 0; n < bytes; ++n) {
    h ^= (word >> (8 * n)) & 0xff;
    h *= 0x100000001b3ULL;
  }
  return h;
}

// A tensor with no elements (every sequence of length 0) still gets a
// non-null allocation: kernels and oracles may check pointers, and a
// zero-length batch must reach the kernel as a valid problem.
constexpr size_t kMinAllocation = 64;
size_t allocation(size_t bytes) { return std::max(bytes, kMinAllocation); }

uint32_t poison_bits(Poison p, afz_dtype t) {
  switch (p) {
    case Poison::Inf: return inf_bits(t, false);
    case Poison::None: return 0;
    default: return quiet_nan_bits(t);
  }
}

}  // namespace

uint32_t output_poison_bits(afz_dtype t) {
  switch (t) {
    case AFZ_F16: return kPoisonF16;
    case AFZ_BF16: return kPoisonBF16;
    default: return kPoisonF32;
  }
}

void generate_unrounded(const Case& c, LogicalTensors& x) {
  x.batch = c.batch;
  x.heads_q = c.heads_q;
  x.heads_kv = c.heads_kv;
  x.sq = c.max_seqlen_q();
  x.sk = c.max_seqlen_k();
  x.d = c.head_dim;
  x.dv = c.head_dim_v;
  x.q.assign(size_t(x.batch) * x.heads_q * x.sq * x.d, 0.0);
  x.k.assign(size_t(x.batch) * x.heads_kv * x.sk * x.d, 0.0);
  x.v.assign(size_t(x.batch) * x.heads_kv * x.sk * x.dv, 0.0);
  fill_distribution(x.q, c.values_q, c.seed, kStreamQ, x.d);
  fill_distribution(x.k, c.values_k, c.seed, kStreamK, x.d);
  fill_distribution(x.v, c.values_v, c.seed, kStreamV, x.dv);
  for (size_t n = 0; n < c.transforms.size(); ++n) {
    const TransformDef* def = find_transform(c.transforms[n].name);
    if (!def) throw std::runtime_error("unknown transform '" + c.transforms[n].name + "'");
    def->apply(c, c.transforms[n], CounterRng(c.seed, kStreamTransform + n), x);
  }
  // K and V shared across heads or batch: every copy equals the first.
  if (c.kv_broadcast != KvBroadcast::None) {
    for (int b = 0; b < x.batch; ++b)
      for (int h = 0; h < x.heads_kv; ++h) {
        const int b0 = c.kv_broadcast == KvBroadcast::Batch ? 0 : b;
        const int h0 = c.kv_broadcast == KvBroadcast::Heads ? 0 : h;
        for (int j = 0; j < x.sk; ++j) {
          for (int d = 0; d < x.d; ++d) x.K(b, h, j, d) = x.K(b0, h0, j, d);
          for (int d = 0; d < x.dv; ++d) x.V(b, h, j, d) = x.V(b0, h0, j, d);
        }
      }
  }
}

void generate_logical(const Case& c, LogicalTensors& x) {
  generate_unrounded(c, x);
  for (std::vector<double>* t : {&x.q, &x.k, &x.v}) {
    double* data = t->data();
    for_each_chunk(int64_t(t->size()), 1, [&](int64_t begin, int64_t end) {
      for (int64_t n = begin; n < end; ++n) data[n] = round_to(c.in_dtype, data[n]);
    });
  }
}

Materialized::Materialized(const Case& c) : case_(c) {
  if (auto err = validate_case(c)) throw std::runtime_error(err->field + ": " + err->message);
  const TensorViews views = tensor_views(c);
  seqlens_q_ = c.seqlens_q;
  seqlens_k_ = c.seqlens_k;
  const afz_dtype in = c.in_dtype;
  const size_t esz = size_t(size_of(in));
  const uint32_t poison = poison_bits(c.poison, in);
  const int sq = c.max_seqlen_q(), sk = c.max_seqlen_k();

  afz_problem& p = problem_;
  p.abi_version = AFZ_ABI_VERSION;
  p.batch = c.batch;
  p.heads_q = c.heads_q;
  p.heads_kv = c.heads_kv;
  p.head_dim = c.head_dim;
  p.head_dim_v = c.head_dim_v;
  p.max_seqlen_q = sq;
  p.max_seqlen_k = sk;
  p.seqlens_q = seqlens_q_.data();
  p.seqlens_k = seqlens_k_.data();
  p.scale = c.effective_scale();
  p.softcap = float(round_to(AFZ_F32, c.softcap));
  p.has_window = c.has_window;
  p.window_left = c.window_left;
  p.window_right = c.window_right;
  p.align = c.align;

  // Q, K, V buffers, allocated uninitialized: the scatter below writes every
  // element its views span (values, padding and gap poison), and the fill
  // here the allocation's tail past them (an empty tensor's minimum).
  auto buffer = [&](std::unique_ptr<uint8_t[]>& storage, int64_t elements) {
    const size_t used = size_t(elements) * esz, bytes = allocation(used);
    storage.reset(new uint8_t[bytes]);
    fill_elements(storage.get(), used, bytes, in, poison);
    return storage.get();
  };
  uint8_t *bq, *bk, *bv;
  if (c.layout == Layout::PackedQKV) {
    bq = bk = bv = buffer(qkv_storage_, views.packed_elements);
  } else {
    bq = buffer(q_storage_, views.q_elements);
    bk = buffer(k_storage_, views.k_elements);
    bv = buffer(v_storage_, views.v_elements);
  }
  auto tensor = [&](uint8_t* base, const View& v) {
    afz_tensor t{};
    t.data = base + v.offset * int64_t(esz);
    t.dtype = in;
    std::copy(v.stride, v.stride + 4, t.stride);
    return t;
  };
  p.q = tensor(bq, views.q);
  p.k = tensor(bk, views.k);
  p.v = tensor(bv, views.v);

  // Values rounded as they are written.
  const std::vector<int> q_valid(c.seqlens_q.begin(), c.seqlens_q.end());
  std::vector<int> kv_valid(c.seqlens_k.begin(), c.seqlens_k.end());
  // K and V broadcast over the batch: the one stored sequence holds values
  // as far as the longest sequence of the batch reads.
  if (c.kv_broadcast == KvBroadcast::Batch) kv_valid = {sk};
  const ScatterTarget tq{bq, views.q, in, c.batch, c.heads_q, views.q_extent, c.row_gap, q_valid};
  const ScatterTarget tk{bk, views.k, in, views.kv_batch_slots, views.kv_head_slots, views.kv_extent, c.row_gap, kv_valid};
  const ScatterTarget tv{bv, views.v, in, views.kv_batch_slots, views.kv_head_slots, views.kv_extent, c.row_gap, kv_valid};
  if (c.transforms.empty() && c.kv_broadcast == KvBroadcast::None) {
    // Nothing mixes the tensors (generate_unrounded is then three fills):
    // one tensor of doubles alive at a time, so a case past 2^31 elements
    // peaks at one double tensor beside its inputs, not three.
    auto one = [&](const Distribution& dist, uint64_t stream, int heads, int seq, int row, const ScatterTarget& t) {
      std::vector<double> values(size_t(c.batch) * size_t(heads) * size_t(seq) * size_t(row));
      fill_distribution(values, dist, c.seed, stream, row);
      scatter_rounded({values.data(), heads, seq, row}, t, poison);
    };
    one(c.values_q, kStreamQ, c.heads_q, sq, c.head_dim, tq);
    one(c.values_k, kStreamK, c.heads_kv, sk, c.head_dim, tk);
    one(c.values_v, kStreamV, c.heads_kv, sk, c.head_dim_v, tv);
  } else {
    LogicalTensors x;
    generate_unrounded(c, x);
    scatter_rounded({x.q.data(), x.heads_q, x.sq, x.d}, tq, poison);
    scatter_rounded({x.k.data(), x.heads_kv, x.sk, x.d}, tk, poison);
    scatter_rounded({x.v.data(), x.heads_kv, x.sk, x.dv}, tv, poison);
  }

  // Explicit masks, [b][i][j] broadcast over heads (stride 0).
  const CounterRng mask_rng(c.seed, kStreamMask), add_mask_rng(c.seed, kStreamMask + 1);
  const int64_t mask_stride[4] = {int64_t(sq) * sk, 0, sk, 1};
  if (c.bool_mask) {
    bool_storage_.assign(size_t(c.batch) * sq * sk, 1);
    for (int b = 0; b < c.batch; ++b)
      for (int i = 0; i < sq; ++i)
        for (int j = 0; j < sk; ++j)
          if (pattern_masks(*c.bool_mask, mask_rng, b, i, j)) bool_storage_[(size_t(b) * sq + i) * sk + j] = 0;
    p.bool_mask.data = bool_storage_.data();
    p.bool_mask.dtype = AFZ_U8;
    std::copy(mask_stride, mask_stride + 4, p.bool_mask.stride);
  }
  if (c.add_mask) {
    double value = c.add_mask->value;
    if (c.add_mask->value_kind == AddValueKind::NegInf) value = -std::numeric_limits<double>::infinity();
    if (c.add_mask->value_kind == AddValueKind::Lowest) value = lowest_finite(c.in_dtype);
    const float fvalue = float(round_to(AFZ_F32, value));
    add_storage_.assign(size_t(c.batch) * sq * sk, 0.0f);
    for (int b = 0; b < c.batch; ++b)
      for (int i = 0; i < sq; ++i)
        for (int j = 0; j < sk; ++j)
          if (pattern_masks(c.add_mask->pattern, add_mask_rng, b, i, j))
            add_storage_[(size_t(b) * sq + i) * sk + j] = fvalue;
    p.add_mask.data = add_storage_.data();
    p.add_mask.dtype = AFZ_F32;
    std::copy(mask_stride, mask_stride + 4, p.add_mask.stride);
  }

  // Outputs: O in Q's layout (row gaps included), LSE dense [b][h][i].
  const afz_dtype out = c.out_dtype;
  o_storage_.resize(allocation(size_t(views.o_elements) * size_t(size_of(out))));
  p.o.data = o_storage_.data();
  p.o.dtype = out;
  std::copy(views.o.stride, views.o.stride + 4, p.o.stride);
  lse_storage_.resize(std::max<size_t>(size_t(views.lse_elements), 1));
  p.lse = lse_storage_.data();
  std::copy(views.lse_stride, views.lse_stride + 3, p.lse_stride);
  poison_outputs();
}

const LogicalTensors& Materialized::logical() const {
  std::call_once(logical_built_, [this] { generate_logical(case_, logical_); });
  return logical_;
}

void Materialized::poison_outputs() {
  fill_elements(o_storage_.data(), 0, o_storage_.size(), problem_.o.dtype, output_poison_bits(problem_.o.dtype));
  std::fill(lse_storage_.begin(), lse_storage_.end(), float_of(kPoisonF32));
}

static const uint8_t* element(const afz_tensor& t, int b, int h, int s, int d) {
  return static_cast<const uint8_t*>(t.data) +
         (b * t.stride[0] + h * t.stride[1] + s * t.stride[2] + d * t.stride[3]) * size_of(t.dtype);
}

double Materialized::o_at(int b, int h, int i, int x) const { return load(problem_.o.dtype, element(problem_.o, b, h, i, x)); }

uint32_t Materialized::o_bits_at(int b, int h, int i, int x) const {
  const uint8_t* at = element(problem_.o, b, h, i, x);
  if (size_of(problem_.o.dtype) == 4) { uint32_t w; std::memcpy(&w, at, 4); return w; }
  uint16_t w;
  std::memcpy(&w, at, 2);
  return w;
}

float Materialized::lse_at(int b, int h, int i) const {
  return problem_.lse[b * problem_.lse_stride[0] + h * problem_.lse_stride[1] + i * problem_.lse_stride[2]];
}

bool Materialized::visible(int b, int, int i, int j) const {
  const afz_problem& p = problem_;
  if (i >= p.seqlens_q[b] || j >= p.seqlens_k[b]) return false;
  if (p.has_window) {
    const int64_t offset = p.align == AFZ_ALIGN_BOTTOM_RIGHT ? int64_t(p.seqlens_k[b]) - p.seqlens_q[b] : 0;
    const int64_t diag = i + offset;  // the key aligned with query i
    if (p.window_left >= 0 && j < diag - p.window_left) return false;
    if (p.window_right >= 0 && j > diag + p.window_right) return false;
  }
  if (p.bool_mask.data && *element(p.bool_mask, b, 0, i, j) == 0) return false;
  return true;
}

double Materialized::add_mask_at(int b, int, int i, int j) const {
  if (!problem_.add_mask.data) return 0.0;
  return load(AFZ_F32, element(problem_.add_mask, b, 0, i, j));
}

uint64_t Materialized::input_hash() const {
  uint64_t h = 0xcbf29ce484222325ULL;
  const afz_dtype in = case_.in_dtype;
  const FloatFormat& f = format_of(in);
  auto mix = [&](double v) { h = fnv1a(h, round_bits(f, v), size_of(in)); };
  const LogicalTensors& x = logical();
  for (double v : x.q) mix(v);
  for (double v : x.k) mix(v);
  for (double v : x.v) mix(v);
  for (uint8_t m : bool_storage_) h = fnv1a(h, m, 1);
  for (float a : add_storage_) h = fnv1a(h, bits_of(a), 4);
  h = fnv1a(h, bits_of(problem_.scale), 4);
  return h;
}

std::vector<uint8_t> Materialized::output_bytes() const {
  std::vector<uint8_t> out(o_storage_);
  const uint8_t* l = reinterpret_cast<const uint8_t*>(lse_storage_.data());
  out.insert(out.end(), l, l + lse_storage_.size() * sizeof(float));
  return out;
}

bool Materialized::set_output_bytes(const std::vector<uint8_t>& bytes) {
  const size_t lse_bytes = lse_storage_.size() * sizeof(float);
  if (bytes.size() != o_storage_.size() + lse_bytes) return false;
  std::memcpy(o_storage_.data(), bytes.data(), o_storage_.size());
  std::memcpy(lse_storage_.data(), bytes.data() + o_storage_.size(), lse_bytes);
  return true;
}

}  // namespace afz
